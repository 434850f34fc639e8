-- The audit trail: append-only, enforced by the database, hash-chained. Application roles
-- cannot touch the tables at all; they append through audit.append(), which runs as the
-- owner, assigns the next sequence number and chains the event to the previous one's hash
-- inside the caller's transaction. Canonical form, verification, retention: docs/audit.md.
--
-- Scale: audit.events is range-partitioned by month of occurred_at (UTC), so a closed month
-- can be archived and detached without rewriting anything, and time-bounded auditor queries
-- touch only their months. append() makes occurred_at non-decreasing in seq, so every
-- partition holds one contiguous run of sequence numbers.

CREATE TABLE audit.events (
  seq            bigint NOT NULL CHECK (seq > 0),
  occurred_at    timestamptz NOT NULL,
  -- Dotted lowercase names only: no newline can reach the hashed text through `type`.
  type           text NOT NULL CHECK (type ~ '^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$'),
  body           text NOT NULL,      -- canonical JSON of the event, exactly as hashed
  prev_hash      text NOT NULL CHECK (prev_hash ~ '^[0-9a-f]{64}$'),
  hash           text NOT NULL CHECK (hash ~ '^[0-9a-f]{64}$'),
  -- Columns for querying, copied from the body by append(); audit:verify checks that they
  -- still match the hashed body.
  task_id        text,
  tenant         text,
  subject        text,
  client         text,
  tool           text,
  reason         text,
  correlation_id text,
  actor_subject  text,
  actor_kind     text
) PARTITION BY RANGE (occurred_at);
-- No primary key on the parent: a partitioned table's unique keys must contain the
-- partition key, and (seq, occurred_at) would not stop a second event with the same seq.
-- Each partition gets UNIQUE (seq) instead (ensure_partition); across months, seq is unique
-- because append() serialises appenders, and audit:verify reports a duplicate as inserted.

-- The newest event (append() reads it under the chain lock: ORDER BY occurred_at DESC
-- LIMIT 1 scans the partitions newest first and stops at the first hit), and time ranges.
CREATE INDEX events_time ON audit.events (occurred_at, seq);
CREATE INDEX events_task ON audit.events (task_id, seq) WHERE task_id IS NOT NULL;
CREATE INDEX events_principal ON audit.events (tenant, subject, seq);
-- Every index is paid for inside the chain lock on each append: the views' other needs are
-- partial indexes in 006_audit_views.sql, maintained only for the events they cover.

CREATE FUNCTION audit.refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is append-only (% refused)', TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'insufficient_privilege';
END $$;
-- Row triggers on a partitioned table are cloned onto every partition, present and future;
-- TRUNCATE triggers are not, so ensure_partition() adds one to each partition.
CREATE TRIGGER events_no_update BEFORE UPDATE OR DELETE ON audit.events
  FOR EACH ROW EXECUTE FUNCTION audit.refuse_change();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON audit.events
  FOR EACH STATEMENT EXECUTE FUNCTION audit.refuse_change();

-- The chained hash, byte for byte (docs/audit.md): lowercase hex SHA-256 of the UTF-8 text
--   seq LF occurred_at LF type LF prev_hash LF body
-- with seq in decimal, occurred_at as YYYY-MM-DDTHH:MM:SS.ffffffZ in UTC (always six
-- fractional digits), and no trailing newline. Auditors can recompute it in SQL with this
-- function, or in any language.
CREATE FUNCTION audit.event_hash(p_seq bigint, p_occurred_at timestamptz, p_type text,
                                 p_prev_hash text, p_body text) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE AS $$
  SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
    p_seq::text || E'\n'
    || pg_catalog.to_char(p_occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
    || E'\n' || p_type || E'\n' || p_prev_hash || E'\n' || p_body, 'UTF8')), 'hex')
$$;

-- The chain lock: one appender (or partition maintainer) at a time, held to the end of the
-- transaction. A transaction-level advisory lock is released after the commit is visible,
-- so the next holder's fresh snapshot sees the event its predecessor appended.
CREATE FUNCTION audit.lock_chain() RETURNS void
LANGUAGE sql AS $$ SELECT pg_catalog.pg_advisory_xact_lock(7310042002) $$;

-- The partition for the UTC month containing p_at, created if missing, under the chain lock
-- so it never races append() (or another maintenance run) creating the same one.
-- LIKE + ATTACH rather than CREATE TABLE ... PARTITION OF: ATTACH needs only a SHARE UPDATE
-- EXCLUSIVE lock on audit.events, so readers and writers carry on meanwhile.
CREATE FUNCTION audit.ensure_partition(p_at timestamptz) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, audit AS $$
DECLARE
  v_from timestamptz := date_trunc('month', p_at, 'UTC');
  -- Month arithmetic in UTC, whatever the session's TimeZone.
  v_to timestamptz := ((v_from AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
  v_name text := 'events_' || to_char(v_from AT TIME ZONE 'UTC', 'YYYY_MM');
BEGIN
  PERFORM audit.lock_chain();
  IF to_regclass('audit.' || v_name) IS NOT NULL THEN
    RETURN v_name;
  END IF;
  EXECUTE format('CREATE TABLE audit.%I (LIKE audit.events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                 v_name);
  EXECUTE format('CREATE UNIQUE INDEX %I ON audit.%I (seq)', v_name || '_seq', v_name);
  EXECUTE format('ALTER TABLE audit.events ATTACH PARTITION audit.%I FOR VALUES FROM (%L) TO (%L)',
                 v_name, v_from, v_to);
  EXECUTE format('CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON audit.%I '
                 'FOR EACH STATEMENT EXECUTE FUNCTION audit.refuse_change()', v_name);
  EXECUTE format('REVOKE ALL ON audit.%I FROM PUBLIC', v_name);
  RETURN v_name;
END $$;

-- Partitions for this month and the next p_months_ahead, so appends rarely create one (the
-- checkpoint job calls this on every run).
CREATE FUNCTION audit.ensure_partitions(p_months_ahead integer DEFAULT 2) RETURNS SETOF text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, audit AS $$
DECLARE
  v_now timestamp := clock_timestamp() AT TIME ZONE 'UTC';
BEGIN
  FOR i IN 0 .. greatest(p_months_ahead, 0) LOOP
    RETURN NEXT audit.ensure_partition((v_now + make_interval(months => i)) AT TIME ZONE 'UTC');
  END LOOP;
END $$;

-- Appends one event. `p_body` is the canonical JSON text the writer produced (an object,
-- without seq, time or hashes); the chained hash covers seq, time, type, prev_hash and body.
CREATE FUNCTION audit.append(p_type text, p_body text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, audit AS $$
DECLARE
  v_last record;
  v_seq bigint;
  v_prev text;
  v_at timestamptz;
  v_hash text;
  -- jsonb refuses \u0000; it is replaced for the query columns only, the hash covers the
  -- body exactly as given.
  v_json jsonb := replace(p_body, '\u0000', '\ufffd')::jsonb;
BEGIN
  IF jsonb_typeof(v_json) IS DISTINCT FROM 'object' THEN
    RAISE EXCEPTION 'audit.append: the body must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Under REPEATABLE READ or SERIALIZABLE the snapshot predates the lock and could miss the
  -- newest event: the chain would fork.
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'audit.append must run in a READ COMMITTED transaction (not %)',
      current_setting('transaction_isolation') USING ERRCODE = 'invalid_transaction_state';
  END IF;
  -- One appender at a time, held to the end of the caller's transaction: sequence numbers
  -- have no gaps and the chain has no forks, whatever number of processes write.
  PERFORM audit.lock_chain();
  SELECT seq, hash, occurred_at INTO v_last
    FROM audit.events ORDER BY occurred_at DESC, seq DESC LIMIT 1;
  v_seq := COALESCE(v_last.seq, 0) + 1;
  v_prev := COALESCE(v_last.hash, repeat('0', 64));
  -- Taken under the lock and never behind the previous event, so occurred_at grows with
  -- seq and each month's partition holds one contiguous run of events.
  v_at := greatest(clock_timestamp(), v_last.occurred_at);
  IF v_last.occurred_at IS NULL
     OR date_trunc('month', v_at, 'UTC') <> date_trunc('month', v_last.occurred_at, 'UTC') THEN
    PERFORM audit.ensure_partition(v_at);
  END IF;
  v_hash := audit.event_hash(v_seq, v_at, p_type, v_prev, p_body);
  INSERT INTO audit.events (seq, occurred_at, type, body, prev_hash, hash, task_id, tenant,
                            subject, client, tool, reason, correlation_id, actor_subject,
                            actor_kind)
  VALUES (v_seq, v_at, p_type, p_body, v_prev, v_hash, v_json->>'taskId',
          v_json->>'tenant', v_json->>'subject', v_json->>'client', v_json->>'tool',
          v_json->>'reason', v_json->>'correlationId', v_json->'actor'->>'subject',
          v_json->'actor'->>'kind');
  RETURN v_seq;
END $$;

SELECT audit.ensure_partitions(2);

REVOKE ALL ON audit.events FROM PUBLIC;
REVOKE ALL ON FUNCTION audit.append(text, text), audit.lock_chain(),
  audit.ensure_partition(timestamptz), audit.ensure_partitions(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit.append(text, text) TO mtg_gateway, mtg_worker;
-- The auditor reads through views only (006_audit_views.sql).
