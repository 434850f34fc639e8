-- The audit trail: append-only, enforced by the database. Application roles cannot touch the
-- table at all; they append through audit.append(), which runs as the owner, assigns the
-- next sequence number and chains each event to the previous one's hash inside the caller's
-- transaction. (Canonical form and verification: docs/audit.md.)
CREATE TABLE audit.events (
  seq          bigint PRIMARY KEY,
  occurred_at  timestamptz NOT NULL,
  type         text NOT NULL,
  body         text NOT NULL,      -- canonical JSON of the event (RFC 8785 style), as hashed
  prev_hash    text NOT NULL,
  hash         text NOT NULL,
  -- Columns for querying, copied from the body by append():
  task_id      text,
  tenant       text,
  subject      text,
  client       text,
  tool         text,
  reason       text,
  correlation_id text
);
CREATE INDEX events_task ON audit.events (task_id, seq) WHERE task_id IS NOT NULL;
CREATE INDEX events_principal ON audit.events (tenant, subject, seq);
CREATE INDEX events_type ON audit.events (type, seq);

CREATE FUNCTION audit.refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'audit.events is append-only (% refused)', TG_OP
    USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER events_no_update BEFORE UPDATE OR DELETE ON audit.events
  FOR EACH ROW EXECUTE FUNCTION audit.refuse_change();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON audit.events
  FOR EACH STATEMENT EXECUTE FUNCTION audit.refuse_change();

-- Appends one event. `body` is the canonical JSON text the writer produced (without seq,
-- time or hashes); the chained hash covers seq, time, type, prev_hash and body.
CREATE FUNCTION audit.append(p_type text, p_body text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, audit AS $$
DECLARE
  head record;
  v_seq bigint;
  v_prev text;
  v_at timestamptz := clock_timestamp();
  v_json jsonb := p_body::jsonb;
  v_hash text;
BEGIN
  -- One appender at a time, held to the end of the caller's transaction: sequence numbers
  -- have no gaps and the chain has no forks, whatever number of processes write.
  PERFORM pg_advisory_xact_lock(7310042002);
  SELECT seq, hash INTO head FROM audit.events ORDER BY seq DESC LIMIT 1;
  v_seq := COALESCE(head.seq, 0) + 1;
  v_prev := COALESCE(head.hash, repeat('0', 64));
  v_hash := encode(sha256(convert_to(
    v_seq::text || E'\n' || to_char(v_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
    || E'\n' || p_type || E'\n' || v_prev || E'\n' || p_body, 'UTF8')), 'hex');
  INSERT INTO audit.events (seq, occurred_at, type, body, prev_hash, hash, task_id, tenant,
                            subject, client, tool, reason, correlation_id)
  VALUES (v_seq, v_at, p_type, p_body, v_prev, v_hash, v_json->>'taskId', v_json->>'tenant',
          v_json->>'subject', v_json->>'client', v_json->>'tool', v_json->>'reason',
          v_json->>'correlationId');
  RETURN v_seq;
END $$;

REVOKE ALL ON audit.events FROM PUBLIC;
REVOKE ALL ON FUNCTION audit.append(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit.append(text, text) TO mtg_gateway, mtg_worker;
GRANT SELECT ON audit.events TO mtg_auditor;
