-- What auditors read. mtg_auditor has no privilege on the tables, only SELECT on these
-- views (and EXECUTE on audit.event_hash / audit.partition_bounds), so the product can
-- change its storage without changing what reviewers query. Sample queries: docs/audit.md.
--
-- `data` is the event's details object; bodies are parsed with \u0000 replaced, as in
-- append(), because jsonb refuses that escape.

-- Every event with its chain fields: what audit:verify reads.
CREATE VIEW audit.event_log AS
  SELECT seq, occurred_at, type, tenant, subject, client, tool, task_id, reason,
         correlation_id, actor_subject, actor_kind, body, prev_hash, hash
  FROM audit.events;

-- The newest event: what audit:checkpoint signs.
CREATE VIEW audit.chain_head AS
  SELECT seq, hash, occurred_at FROM audit.events ORDER BY occurred_at DESC, seq DESC LIMIT 1;

CREATE VIEW audit.checkpoint_log AS
  SELECT id, seq, hash, signed_at, key_id, jws, recorded_at FROM audit.checkpoints;

-- One task's story in order: who created it, which worker ran it, every read, cancel and
-- outcome. Uses events_task.
CREATE VIEW audit.task_timeline AS
  SELECT task_id, seq, occurred_at, type, tenant, subject, client, tool, reason,
         correlation_id, actor_subject, actor_kind,
         (replace(body, '\u0000', '\ufffd')::jsonb) -> 'data' AS data
  FROM audit.events
  WHERE task_id IS NOT NULL;

-- Every refusal, with its reason code and the verb refused.
CREATE VIEW audit.denials AS
  SELECT seq, occurred_at, type, tenant, subject, client, tool, task_id, reason,
         correlation_id,
         (replace(body, '\u0000', '\ufffd')::jsonb) -> 'data' ->> 'verb' AS verb,
         (replace(body, '\u0000', '\ufffd')::jsonb) -> 'data' AS data
  FROM audit.events
  WHERE type IN ('task.denied', 'auth.denied');
CREATE INDEX events_denials ON audit.events (tenant, occurred_at)
  WHERE type IN ('task.denied', 'auth.denied');

-- Delegations and identity changes: a worker acting for a user, a refreshed user identity,
-- a principal revoked (disabled) or restored by the identity provider.
CREATE VIEW audit.identity_changes AS
  SELECT seq, occurred_at, type, tenant, subject, client, task_id, reason, correlation_id,
         actor_subject, actor_kind,
         (replace(body, '\u0000', '\ufffd')::jsonb) -> 'data' AS data
  FROM audit.events
  WHERE type IN ('task.delegated', 'task.identity_refreshed', 'principal.revoked',
                 'principal.restored');
CREATE INDEX events_identity ON audit.events (tenant, subject, occurred_at)
  WHERE type IN ('task.delegated', 'task.identity_refreshed', 'principal.revoked',
                 'principal.restored');

-- Everything a principal did or had done for them: `role` is 'subject' for events about
-- their own requests and tasks, 'actor' where they acted on someone else's (an admin
-- cancelling, a worker running). Filter on tenant and principal: both branches use an
-- index (events_principal, events_actor).
CREATE VIEW audit.principal_activity AS
  SELECT tenant, subject AS principal, 'subject'::text AS role, seq, occurred_at, type,
         client, tool, task_id, reason, correlation_id, actor_subject, actor_kind
  FROM audit.events
  WHERE subject IS NOT NULL
  UNION ALL
  SELECT tenant, actor_subject, 'actor', seq, occurred_at, type, client, tool, task_id,
         reason, correlation_id, actor_subject, actor_kind
  FROM audit.events
  WHERE actor_subject IS NOT NULL AND actor_subject IS DISTINCT FROM subject;
CREATE INDEX events_actor ON audit.events (tenant, actor_subject, seq)
  WHERE actor_subject IS NOT NULL;

-- The months as stored: each partition's range and the chain values at its edges (what an
-- archive of that month must keep). Sequence numbers in a month are contiguous, so
-- events = last_seq - first_seq + 1 when the chain is intact.
CREATE FUNCTION audit.partition_bounds()
RETURNS TABLE (partition text, range_from timestamptz, range_to timestamptz,
               first_seq bigint, first_prev_hash text, last_seq bigint, last_hash text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, audit AS $$
DECLARE
  p record;
BEGIN
  FOR p IN
    SELECT c.relname,
           (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']+)''\) TO \(''([^'']+)''\)')) AS b
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'audit.events'::regclass
    ORDER BY c.relname
  LOOP
    partition := p.relname;
    range_from := p.b[1]::timestamptz;
    range_to := p.b[2]::timestamptz;
    EXECUTE format('SELECT seq, prev_hash FROM audit.%I ORDER BY seq LIMIT 1', p.relname)
      INTO first_seq, first_prev_hash;
    EXECUTE format('SELECT seq, hash FROM audit.%I ORDER BY seq DESC LIMIT 1', p.relname)
      INTO last_seq, last_hash;
    RETURN NEXT;
  END LOOP;
END $$;

-- Retention (owner only): detaches a closed month's partition, oldest first, once a signed
-- checkpoint covers its last event, so the rest of the chain stays verifiable from that
-- checkpoint (audit:verify --from-checkpoint). The detached table stays in place to be
-- exported and dropped (docs/audit.md, "Retention and archival"). lock_timeout: DETACH
-- waits for readers, and appends would queue behind it.
CREATE FUNCTION audit.detach_month(p_month date) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, audit SET lock_timeout = '5s' AS $$
DECLARE
  v_name text := 'events_' || to_char(p_month, 'YYYY_MM');
  v_head_at timestamptz;
  v_last_seq bigint;
  v_last_hash text;
  v_older text;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                 WHERE i.inhparent = 'audit.events'::regclass AND c.relname = v_name) THEN
    RAISE EXCEPTION 'audit.detach_month: % is not a partition of audit.events', v_name;
  END IF;
  SELECT occurred_at INTO v_head_at FROM audit.events ORDER BY occurred_at DESC, seq DESC LIMIT 1;
  IF v_head_at IS NULL
     OR date_trunc('month', p_month) >= date_trunc('month', v_head_at AT TIME ZONE 'UTC') THEN
    RAISE EXCEPTION 'audit.detach_month: % is not closed (the chain head is in it or before it)', v_name;
  END IF;
  FOR v_older IN
    SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'audit.events'::regclass AND c.relname < v_name ORDER BY c.relname
  LOOP
    EXECUTE format('SELECT seq FROM audit.%I LIMIT 1', v_older) INTO v_last_seq;
    IF v_last_seq IS NOT NULL THEN
      RAISE EXCEPTION 'audit.detach_month: detach % first (oldest month first)', v_older;
    END IF;
  END LOOP;
  EXECUTE format('SELECT seq, hash FROM audit.%I ORDER BY seq DESC LIMIT 1', v_name)
    INTO v_last_seq, v_last_hash;
  IF v_last_seq IS NOT NULL AND NOT EXISTS (
       SELECT 1 FROM audit.checkpoints WHERE seq = v_last_seq AND hash = v_last_hash) THEN
    RAISE EXCEPTION 'audit.detach_month: no checkpoint at the last event of % (seq %): run npm run audit:checkpoint -- --seq % first',
      v_name, v_last_seq, v_last_seq;
  END IF;
  EXECUTE format('ALTER TABLE audit.events DETACH PARTITION audit.%I', v_name);
  RETURN v_name;
END $$;

REVOKE ALL ON FUNCTION audit.partition_bounds(), audit.detach_month(date) FROM PUBLIC;
GRANT SELECT ON audit.event_log, audit.chain_head, audit.checkpoint_log, audit.task_timeline,
  audit.denials, audit.identity_changes, audit.principal_activity TO mtg_auditor;
GRANT EXECUTE ON FUNCTION audit.partition_bounds() TO mtg_auditor, mtg_audit_signer;
GRANT SELECT ON audit.event_log, audit.chain_head, audit.checkpoint_log TO mtg_audit_signer;
