-- A start's admission checks, one round trip instead of four (packages/tasks, create-task.ts):
-- after its task row is inserted, a start took the tenant's cap lock, counted the active
-- tasks of the tenant and of its subject, took its principal's lock (shared), and read the
-- principal's revocation, each its own statement. Each count and read must come after its
-- lock and see what committed while it waited: in a VOLATILE function under READ COMMITTED
-- every statement takes a fresh snapshot, so these keep that order in one call. The lock keys
-- are those of create-task.ts (the cap lock) and revoke-principal.ts (the principal's lock,
-- which a revocation takes exclusively), and the active statuses are its ACTIVE predicate;
-- test/e2e/start-admission.test.ts checks the three against this definition.
CREATE FUNCTION app.start_admission(p_tenant text, p_subject text)
RETURNS TABLE (user_active int, tenant_active int, revoked boolean, revoked_second bigint)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('mtg-cap:' || p_tenant));
  SELECT count(*) FILTER (WHERE t.subject = p_subject)::int, count(*)::int
    INTO user_active, tenant_active
    FROM app.tasks t
   WHERE t.tenant = p_tenant AND t.status IN ('working', 'input_required');
  PERFORM pg_advisory_xact_lock_shared(7310, hashtext(length(p_tenant) || ':' || p_tenant || p_subject));
  SELECT p.revoked, floor(extract(epoch FROM p.revoked_at))::bigint
    INTO revoked, revoked_second
    FROM app.principals p
   WHERE p.tenant = p_tenant AND p.subject = p_subject;
  RETURN NEXT;
END $$;
REVOKE ALL ON FUNCTION app.start_admission(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION app.start_admission(text, text) TO mtg_gateway;
