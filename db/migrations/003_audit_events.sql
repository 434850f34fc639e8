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
  actor_kind     text,
  -- A partitioned table's unique keys must contain the partition key. Uniqueness of seq on
  -- its own comes from append() (one appender at a time, seq = head + 1) and is checked by
  -- audit:verify, which would report a duplicate as an inserted event.
  PRIMARY KEY (seq, occurred_at)
) PARTITION BY RANGE (occurred_at);

CREATE INDEX events_task ON audit.events (task_id, seq) WHERE task_id IS NOT NULL;
CREATE INDEX events_principal ON audit.events (tenant, subject, seq);
CREATE INDEX events_type ON audit.events (type, seq);
-- Within a month, time ranges: occurred_at grows with seq, so a BRIN index is tiny and exact
-- enough.
CREATE INDEX events_time ON audit.events USING brin (occurred_at);

-- The chain head: one row, the last appended event. Its row lock serialises appenders (held
-- to the end of the caller's transaction), and it saves append() from looking for the
-- newest event across partitions.
CREATE TABLE audit.head (
  singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  seq         bigint NOT NULL,
  hash        text NOT NULL,
  occurred_at timestamptz
);
INSERT INTO audit.head (seq, hash, occurred_at) VALUES (0, repeat('0', 64), NULL);

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
CREATE TRIGGER head_no_delete BEFORE DELETE ON audit.head
  FOR EACH ROW EXECUTE FUNCTION audit.refuse_change();
CREATE TRIGGER head_no_truncate BEFORE TRUNCATE ON audit.head
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

-- The partition for the UTC month containing p_at, created if missing. Takes the head lock
-- first, so it never races append() (or another maintenance run) creating the same one.
-- LIKE + ATTACH rather than CREATE TABLE ... PARTITION OF: ATTACH needs only a SHARE UPDATE
-- EXCLUSIVE lock on audit.events, so readers and writers of other months carry on.
CREATE FUNCTION audit.ensure_partition(p_at timestamptz) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, audit AS $$
DECLARE
  v_from timestamptz := date_trunc('month', p_at, 'UTC');
  -- Month arithmetic in UTC, whatever the session's TimeZone.
  v_to timestamptz := ((v_from AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
  v_name text := 'events_' || to_char(v_from AT TIME ZONE 'UTC', 'YYYY_MM');
BEGIN
  PERFORM 1 FROM audit.head FOR UPDATE;
  IF to_regclass('audit.' || v_name) IS NOT NULL THEN
    RETURN v_name;
  END IF;
  EXECUTE format('CREATE TABLE audit.%I (LIKE audit.events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                 v_name);
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
  v_head audit.head%ROWTYPE;
  v_seq bigint;
  v_at timestamptz;
  v_hash text;
  -- jsonb refuses \u0000; it is replaced for the query columns only, the hash covers the
  -- body exactly as given.
  v_json jsonb := replace(p_body, '\u0000', '\ufffd')::jsonb;
BEGIN
  IF jsonb_typeof(v_json) IS DISTINCT FROM 'object' THEN
    RAISE EXCEPTION 'audit.append: body must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- One appender at a time: the head row stays locked to the end of the caller's
  -- transaction, so sequence numbers have no gaps and the chain has no forks, whatever
  -- number of processes write. (Read committed: the lock returns the newest head. Under
  -- REPEATABLE READ a concurrent append makes this fail with 40001 instead of forking.)
  SELECT * INTO v_head FROM audit.head FOR UPDATE;
  v_seq := v_head.seq + 1;
  -- Taken after the lock and never behind the previous event, so occurred_at grows with
  -- seq and each month's partition holds a contiguous run of events.
  v_at := greatest(clock_timestamp(), v_head.occurred_at);
  IF v_head.occurred_at IS NULL
     OR date_trunc('month', v_at, 'UTC') <> date_trunc('month', v_head.occurred_at, 'UTC') THEN
    PERFORM audit.ensure_partition(v_at);
  END IF;
  v_hash := audit.event_hash(v_seq, v_at, p_type, v_head.hash, p_body);
  INSERT INTO audit.events (seq, occurred_at, type, body, prev_hash, hash, task_id, tenant,
                            subject, client, tool, reason, correlation_id, actor_subject,
                            actor_kind)
  VALUES (v_seq, v_at, p_type, p_body, v_head.hash, v_hash, v_json->>'taskId',
          v_json->>'tenant', v_json->>'subject', v_json->>'client', v_json->>'tool',
          v_json->>'reason', v_json->>'correlationId', v_json->'actor'->>'subject',
          v_json->'actor'->>'kind');
  UPDATE audit.head SET seq = v_seq, hash = v_hash, occurred_at = v_at;
  RETURN v_seq;
END $$;

SELECT audit.ensure_partitions(2);

REVOKE ALL ON audit.events, audit.head FROM PUBLIC;
REVOKE ALL ON FUNCTION audit.append(text, text), audit.ensure_partition(timestamptz),
  audit.ensure_partitions(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit.append(text, text) TO mtg_gateway, mtg_worker;
-- The auditor reads through views only (006_audit_views.sql).
