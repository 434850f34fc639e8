-- The console (apps/console) gets a group role of its own: it reads what an auditor reads
-- (a member of mtg_auditor), and beyond that only its sessions and two summaries for the
-- queues page. Its sessions are not given to mtg_auditor, whose logins (the audit CLI) have
-- no business reading or writing them. Roles are cluster-wide: tolerate the duplicate.
DO $$
BEGIN
  CREATE ROLE mtg_console NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;
GRANT mtg_auditor TO mtg_console;
GRANT USAGE ON SCHEMA app TO mtg_console;
GRANT USAGE ON SCHEMA audit TO mtg_console;

-- Console sessions, shared by every console replica and surviving a restart. The row is
-- found by the SHA-256 of the session id (the cookie's value is never stored); what the
-- session holds (CSRF token, the login under way, the principal and its access token) is
-- sealed with AES-256-GCM under the console's key, bound to the id hash, so a row read from
-- the database or a backup gives neither a usable cookie nor a token, and a row written by
-- anyone without the key does not open.
CREATE TABLE app.console_sessions (
  id_hash       bytea PRIMARY KEY CHECK (octet_length(id_hash) = 32),
  kind          text NOT NULL CHECK (kind IN ('login', 'principal')),
  key_id        text NOT NULL,
  iv            bytea NOT NULL,
  ciphertext    bytea NOT NULL,
  tag           bytea NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  -- The idle timeout counts from here; each request moves it.
  last_seen_at  timestamptz NOT NULL DEFAULT now(),
  -- The end of the login (10 minutes) or of the access token, whichever the session holds.
  expires_at    timestamptz NOT NULL
);
CREATE INDEX console_sessions_expires_at ON app.console_sessions (expires_at);
CREATE INDEX console_sessions_last_seen_at ON app.console_sessions (last_seen_at);
GRANT SELECT, INSERT, UPDATE, DELETE ON app.console_sessions TO mtg_console;

-- The queues page, per queue: open tasks by where they stand. Counts only (no arguments,
-- no principal), read through the view's owner: the console has no privilege on app.tasks.
-- queued: never started; running: a worker holds its lease; retry: started before and handed
-- back (a worker stopped or died), waiting to run again; paused: input_required.
CREATE VIEW app.console_queue_depth AS
  SELECT job_queue AS queue,
         tool,
         count(*) FILTER (WHERE status = 'working' AND lease_owner IS NULL
                            AND started_at IS NULL)::int AS queued,
         count(*) FILTER (WHERE status = 'working' AND lease_owner IS NOT NULL)::int AS running,
         count(*) FILTER (WHERE status = 'working' AND lease_owner IS NULL
                            AND started_at IS NOT NULL)::int AS retry,
         count(*) FILTER (WHERE status = 'input_required')::int AS paused
    FROM app.tasks
   WHERE status IN ('working', 'input_required')
   GROUP BY job_queue, tool;

-- The workers as app.workers knows them (each upserts its row every few seconds), with the
-- tasks each holds the lease of.
CREATE VIEW app.console_workers AS
  SELECT w.id, w.queues, w.registry_fingerprint, w.started_at, w.seen_at,
         (SELECT count(*)::int FROM app.tasks t
           WHERE t.status = 'working' AND t.lease_owner = w.id) AS running
    FROM app.workers w;

GRANT SELECT ON app.console_queue_depth, app.console_workers TO mtg_console;
