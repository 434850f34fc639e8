-- Status reads audited once per caller per change of status (STATUS_READ_AUDIT, docs/audit.md,
-- "Status reads"). A poll loop reads one status many times; an auditor needs who looked at
-- which status, and when they first did, not every repeat.

-- Counts the task's changes of status (working → input_required → working is two), so "the
-- first read after each change" has a key even when a status comes back. Kept by a trigger,
-- not by each UPDATE that sets a status: no transition can forget it.
ALTER TABLE app.tasks ADD COLUMN status_version integer NOT NULL DEFAULT 0;

CREATE FUNCTION app.count_status_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.status_version := OLD.status_version + 1;
  RETURN NEW;
END $$;

CREATE TRIGGER tasks_status_version BEFORE UPDATE OF status ON app.tasks
  FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
  EXECUTE FUNCTION app.count_status_change();

-- One row per (task, caller, status version) whose first read has been audited. The gateway
-- inserts it (ON CONFLICT DO NOTHING) in the same statement that appends the read's event,
-- so the mark and the event commit together, and every gateway replica shares the answer.
-- A repeat finds the mark and writes nothing: no transaction id, no WAL, no commit wait.
-- UNLOGGED: after a crash of PostgreSQL the marks are gone and the next read of each status
-- is recorded again — more events, never fewer.
CREATE UNLOGGED TABLE app.status_read_marks (
  task_id        text NOT NULL REFERENCES app.tasks (id) ON DELETE CASCADE,
  tenant         text NOT NULL,
  subject        text NOT NULL,
  client         text NOT NULL,
  status_version integer NOT NULL,
  PRIMARY KEY (task_id, tenant, subject, client, status_version)
);

GRANT SELECT, INSERT ON app.status_read_marks TO mtg_gateway;

-- The policy each gateway started under is an event of the trail (`audit.policy`, chain 0);
-- the console and `npm run audit` look up the latest ones to say how status reads were kept.
CREATE INDEX events_policy ON audit.events (occurred_at) WHERE type = 'audit.policy';
