-- A start's admission counted the active tasks of its tenant and subject (migration 200): a
-- scan of the partial index tasks_active_tenant, under the tenant's cap lock, so its cost grew
-- with the tenant's backlog (36 ms over 9,700 queued tasks with autovacuum on; 630 ms over
-- 7,700 without a visibility map), paid by every start of the tenant, one at a time. The
-- counts are kept here instead, by triggers on app.tasks, so no path that starts, ends or
-- removes a task can forget them, and the admission reads two rows (docs/scaling.md, "A deep
-- backlog").
--
-- The triggers are deferred to commit. Every path that ends a task appends its audit event in
-- the same transaction, which takes the tenant's chain lock; a counter row written at commit
-- is therefore always locked after the chain, never before it, whatever order the path's
-- statements run in. Starts and endings of one tenant already queue on that chain lock to
-- commit, so the counter row adds no wait of its own. Within one event the tenant's row is
-- written before the subject's, and no transaction ends tasks of two tenants, so two counter
-- writers never wait on each other in opposite order.
CREATE TABLE app.active_tenants (
  tenant text PRIMARY KEY,
  active integer NOT NULL
);
CREATE TABLE app.active_subjects (
  tenant  text NOT NULL,
  subject text NOT NULL,
  active  integer NOT NULL,
  PRIMARY KEY (tenant, subject)
);
GRANT SELECT ON app.active_tenants, app.active_subjects TO mtg_gateway;

-- One row event moves its task's tenant and subject by one: in (inserted or resumed active),
-- or out (ended, or removed while active). The WHEN clauses below say which events do.
-- SECURITY DEFINER: whichever role wrote the task (gateway, worker), the counts are the
-- owner's to write; no application role may write them directly.
CREATE FUNCTION app.count_active_task() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
  d integer;
  r app.tasks;
BEGIN
  IF TG_OP = 'INSERT' THEN
    d := 1; r := NEW;
  ELSIF TG_OP = 'DELETE' THEN
    d := -1; r := OLD;
  ELSE
    d := CASE WHEN NEW.status IN ('working', 'input_required') THEN 1 ELSE -1 END; r := NEW;
  END IF;
  INSERT INTO app.active_tenants AS a (tenant, active) VALUES (r.tenant, d)
    ON CONFLICT (tenant) DO UPDATE SET active = a.active + EXCLUDED.active;
  INSERT INTO app.active_subjects AS a (tenant, subject, active) VALUES (r.tenant, r.subject, d)
    ON CONFLICT (tenant, subject) DO UPDATE SET active = a.active + EXCLUDED.active;
  RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION app.count_active_task() FROM PUBLIC;

-- A TRUNCATE removes every task at once, active ones included, and fires no row trigger.
CREATE FUNCTION app.clear_active_counts() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
  DELETE FROM app.active_tenants;
  DELETE FROM app.active_subjects;
  RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION app.clear_active_counts() FROM PUBLIC;

-- No task may start, end or go while the counts are taken and the triggers installed: the
-- lock waits for every writer in flight (whose rows the counts then see) and holds off the
-- rest until this commits (whose rows the triggers then count). A release without this
-- migration keeps writing tasks during a rolling upgrade: the triggers count its writes too.
LOCK TABLE app.tasks IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO app.active_tenants (tenant, active)
SELECT tenant, count(*) FROM app.tasks WHERE status IN ('working', 'input_required')
 GROUP BY tenant;
INSERT INTO app.active_subjects (tenant, subject, active)
SELECT tenant, subject, count(*) FROM app.tasks WHERE status IN ('working', 'input_required')
 GROUP BY tenant, subject;

CREATE CONSTRAINT TRIGGER tasks_active_in AFTER INSERT ON app.tasks
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (NEW.status IN ('working', 'input_required'))
  EXECUTE FUNCTION app.count_active_task();
CREATE CONSTRAINT TRIGGER tasks_active_moved AFTER UPDATE OF status ON app.tasks
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN ((OLD.status IN ('working', 'input_required')) <> (NEW.status IN ('working', 'input_required')))
  EXECUTE FUNCTION app.count_active_task();
CREATE CONSTRAINT TRIGGER tasks_active_out AFTER DELETE ON app.tasks
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (OLD.status IN ('working', 'input_required'))
  EXECUTE FUNCTION app.count_active_task();
CREATE TRIGGER tasks_active_cleared AFTER TRUNCATE ON app.tasks
  FOR EACH STATEMENT EXECUTE FUNCTION app.clear_active_counts();

-- The admission of migration 200, reading the counts in place of counting: the same locks in
-- the same order, each read after its lock with a snapshot of its own. The counts a start
-- reads include every start of the tenant committed before it took the cap lock (a start's
-- own count is written at its commit, still under that lock), and every ending committed
-- before it read them; an ending still in flight is counted as active, as it was.
CREATE OR REPLACE FUNCTION app.start_admission(p_tenant text, p_subject text)
RETURNS TABLE (user_active int, tenant_active int, revoked boolean, revoked_second bigint)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('mtg-cap:' || p_tenant));
  SELECT COALESCE((SELECT a.active FROM app.active_subjects a
                    WHERE a.tenant = p_tenant AND a.subject = p_subject), 0),
         COALESCE((SELECT a.active FROM app.active_tenants a WHERE a.tenant = p_tenant), 0)
    INTO user_active, tenant_active;
  PERFORM pg_advisory_xact_lock_shared(7310, hashtext(length(p_tenant) || ':' || p_tenant || p_subject));
  SELECT p.revoked, floor(extract(epoch FROM p.revoked_at))::bigint
    INTO revoked, revoked_second
    FROM app.principals p
   WHERE p.tenant = p_tenant AND p.subject = p_subject;
  RETURN NEXT;
END $$;
