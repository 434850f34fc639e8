-- One hash chain per tenant instead of one for the whole deployment (docs/audit.md, "Chains").
-- Every append used to serialise on one advisory lock; now an append locks only its own
-- chain's row in audit.chains, so writers of different tenants append side by side.
--
-- * audit.chains: one row per chain: chain 0 (`system`: events without a tenant, and the
--   whole history written before this migration), and one per tenant, created on its first
--   append. The row holds the chain's head (seq, hash, time) and is its lock.
-- * audit.events gets chain_id. Existing rows are not rewritten: the column is added with a
--   constant default (PostgreSQL stores it once, in the catalogue), so every existing event
--   reads as chain 0, exactly as it was hashed.
-- * The hash of a new event covers its chain: chain LF seq LF occurred_at LF type LF
--   prev_hash LF body. Events of chain 0 up to chains.legacy_until keep the formula they were
--   written with (no chain line); the signed checkpoints carry that boundary.
-- * Checkpoints sign every chain head at once: a sorted list of (chain, seq, hash) and the
--   SHA-256 over it (heads_hash).

-- Under the old chain lock: an append by the previous code waiting for it would otherwise
-- write after the boundary below was taken.
SELECT audit.lock_chain();

CREATE TABLE audit.chains (
  chain_id     bigint PRIMARY KEY CHECK (chain_id >= 0),
  -- NULL for chain 0 only; a tenant has exactly one chain.
  tenant       text UNIQUE,
  head_seq     bigint NOT NULL DEFAULT 0 CHECK (head_seq >= 0),
  head_hash    text NOT NULL DEFAULT repeat('0', 64) CHECK (head_hash ~ '^[0-9a-f]{64}$'),
  head_at      timestamptz,
  -- Chain 0: the last seq hashed with the formula without a chain line (0: none).
  legacy_until bigint NOT NULL DEFAULT 0 CHECK (legacy_until >= 0),
  created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
  CHECK ((chain_id = 0) = (tenant IS NULL)),
  CHECK (chain_id = 0 OR legacy_until = 0)
);
-- Chain ids need not be gapless (a rolled-back first append takes one with it).
CREATE SEQUENCE audit.chain_ids START 1 OWNED BY audit.chains.chain_id;

-- The row is the chain's lock and head: append_many() moves the head forward, nothing else
-- may change. A head that goes back, or a chain that changes tenant or boundary, is refused.
CREATE FUNCTION audit.chains_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'UPDATE' OR NEW.chain_id <> OLD.chain_id
     OR NEW.tenant IS DISTINCT FROM OLD.tenant OR NEW.legacy_until <> OLD.legacy_until
     OR NEW.created_at <> OLD.created_at OR NEW.head_seq <= OLD.head_seq THEN
    RAISE EXCEPTION 'audit.chains: only append_many() moves a chain head forward (% refused)', TG_OP
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER chains_guard BEFORE UPDATE OR DELETE ON audit.chains
  FOR EACH ROW EXECUTE FUNCTION audit.chains_guard();
CREATE TRIGGER chains_no_truncate BEFORE TRUNCATE ON audit.chains
  FOR EACH STATEMENT EXECUTE FUNCTION audit.refuse_change();

-- Constant default: no row is rewritten, every existing event is chain 0.
ALTER TABLE audit.events ADD COLUMN chain_id bigint NOT NULL DEFAULT 0;
ALTER TABLE audit.events ALTER COLUMN chain_id DROP DEFAULT;

-- Chain 0 starts where the single chain ends; its legacy segment is everything so far.
INSERT INTO audit.chains (chain_id, tenant, head_seq, head_hash, head_at, legacy_until)
SELECT 0, NULL, coalesce(h.seq, 0), coalesce(h.hash, repeat('0', 64)), h.occurred_at,
       coalesce(h.seq, 0)
FROM (SELECT 1) one
LEFT JOIN LATERAL (SELECT seq, hash, occurred_at FROM audit.events
                   ORDER BY occurred_at DESC, seq DESC LIMIT 1) h ON true;

-- Sequence numbers are unique per chain now: each partition's UNIQUE (seq) becomes
-- UNIQUE (chain_id, seq), which also serves reading one chain in order.
DO $$
DECLARE
  p text;
BEGIN
  FOR p IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
           WHERE i.inhparent = 'audit.events'::regclass ORDER BY c.relname
  LOOP
    EXECUTE format('CREATE UNIQUE INDEX %I ON audit.%I (chain_id, seq)', p || '_chain_seq', p);
    EXECUTE format('DROP INDEX IF EXISTS audit.%I', p || '_seq');
  END LOOP;
END $$;

-- The chained hash of an event of a chain (every event but chain 0's legacy segment):
--   chain LF seq LF occurred_at LF type LF prev_hash LF body
-- The chain line makes an event unmovable to another chain. The second line tells the two
-- formulas apart: digits here, a timestamp in the legacy one.
CREATE FUNCTION audit.event_hash(p_chain bigint, p_seq bigint, p_occurred_at timestamptz,
                                 p_type text, p_prev_hash text, p_body text) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE AS $$
  SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(
    p_chain::text || E'\n' || p_seq::text || E'\n'
    || pg_catalog.to_char(p_occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
    || E'\n' || p_type || E'\n' || p_prev_hash || E'\n' || p_body, 'UTF8')), 'hex')
$$;

-- Partitions: the fast path takes no lock (appends of every chain pass here at their first
-- event of a month); only creating one takes the maintenance lock, which never waits for a
-- chain.
CREATE OR REPLACE FUNCTION audit.ensure_partition(p_at timestamptz) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, audit AS $$
DECLARE
  v_from timestamptz := date_trunc('month', p_at, 'UTC');
  v_to timestamptz := ((v_from AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
  v_name text := 'events_' || to_char(v_from AT TIME ZONE 'UTC', 'YYYY_MM');
BEGIN
  IF to_regclass('audit.' || v_name) IS NOT NULL THEN
    RETURN v_name;
  END IF;
  PERFORM audit.lock_chain();
  IF to_regclass('audit.' || v_name) IS NOT NULL THEN
    RETURN v_name;
  END IF;
  EXECUTE format('CREATE TABLE audit.%I (LIKE audit.events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                 v_name);
  EXECUTE format('CREATE UNIQUE INDEX %I ON audit.%I (chain_id, seq)', v_name || '_chain_seq', v_name);
  EXECUTE format('ALTER TABLE audit.events ATTACH PARTITION audit.%I FOR VALUES FROM (%L) TO (%L)',
                 v_name, v_from, v_to);
  EXECUTE format('CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON audit.%I '
                 'FOR EACH STATEMENT EXECUTE FUNCTION audit.refuse_change()', v_name);
  EXECUTE format('REVOKE ALL ON audit.%I FROM PUBLIC', v_name);
  RETURN v_name;
END $$;

-- Appends p_types[i] / p_bodies[i] in order; returns each event's seq in its chain. The
-- events may belong to several chains (a group commit of many tenants): the chains are
-- created if new, in tenant order, then locked in chain_id order, so two appenders never
-- wait for each other in a cycle. Within a chain, events keep the order of the arrays.
CREATE OR REPLACE FUNCTION audit.append_many(p_types text[], p_bodies text[]) RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, audit AS $$
DECLARE
  v_n integer := coalesce(array_length(p_types, 1), 0);
  v_json jsonb[] := '{}';
  v_tenant text[] := '{}';
  v_system boolean := false;
  -- The chains of this call, in lock order, and their heads as they move.
  c_id bigint[] := '{}';
  c_tenant text[] := '{}';
  c_seq bigint[] := '{}';
  c_hash text[] := '{}';
  c_at timestamptz[] := '{}';
  c_moved boolean[] := '{}';
  r record;
  k integer;
  v_at timestamptz;
  v_hash text;
  v_seqs bigint[] := '{}';
BEGIN
  IF v_n <> coalesce(array_length(p_bodies, 1), 0) THEN
    RAISE EXCEPTION 'audit.append_many: % types but % bodies', v_n,
      coalesce(array_length(p_bodies, 1), 0) USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF v_n = 0 THEN
    RETURN v_seqs;
  END IF;
  -- Under REPEATABLE READ or SERIALIZABLE the snapshot predates the lock and could miss the
  -- newest head: the chain would fork.
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION 'audit.append must run in a READ COMMITTED transaction (not %)',
      current_setting('transaction_isolation') USING ERRCODE = 'invalid_transaction_state';
  END IF;
  -- Every body parsed before any lock. jsonb refuses \u0000; it is replaced for the query
  -- columns only, the hash covers the body exactly as given.
  FOR i IN 1 .. v_n LOOP
    v_json[i] := replace(p_bodies[i], '\u0000', '\ufffd')::jsonb;
    IF jsonb_typeof(v_json[i]) IS DISTINCT FROM 'object' THEN
      RAISE EXCEPTION 'audit.append: the body must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_tenant[i] := v_json[i]->>'tenant';
    v_system := v_system OR v_tenant[i] IS NULL;
  END LOOP;
  -- A tenant's first event creates its chain. In tenant order: two first appends of the
  -- same new tenants wait for each other in one direction only.
  INSERT INTO audit.chains (chain_id, tenant)
  SELECT nextval('audit.chain_ids'), t
    FROM (SELECT DISTINCT t FROM unnest(v_tenant) t WHERE t IS NOT NULL) s
   WHERE NOT EXISTS (SELECT 1 FROM audit.chains c WHERE c.tenant = s.t)
   ORDER BY t
  ON CONFLICT (tenant) DO NOTHING;
  -- The chain locks, held to the end of the caller's transaction, taken in chain_id order
  -- (the rows are locked as the sorted scan returns them).
  FOR r IN
    SELECT chain_id, tenant, head_seq, head_hash, head_at FROM audit.chains
     WHERE tenant = ANY (v_tenant) OR (v_system AND chain_id = 0)
     ORDER BY chain_id FOR UPDATE
  LOOP
    c_id := c_id || r.chain_id;
    c_tenant := c_tenant || r.tenant;
    c_seq := c_seq || r.head_seq;
    c_hash := c_hash || r.head_hash;
    c_at := c_at || r.head_at;
    c_moved := c_moved || false;
  END LOOP;
  FOR i IN 1 .. v_n LOOP
    k := array_position(c_tenant, v_tenant[i]);  -- array_position finds NULL too
    IF k IS NULL THEN
      RAISE EXCEPTION 'audit.append_many: no chain for tenant %', v_tenant[i];
    END IF;
    c_seq[k] := c_seq[k] + 1;
    -- Taken under the chain's lock and never behind its previous event, so occurred_at grows
    -- with seq in each chain and each month's partition holds one contiguous run of it.
    v_at := greatest(clock_timestamp(), c_at[k]);
    IF c_at[k] IS NULL
       OR date_trunc('month', v_at, 'UTC') <> date_trunc('month', c_at[k], 'UTC') THEN
      PERFORM audit.ensure_partition(v_at);
    END IF;
    v_hash := audit.event_hash(c_id[k], c_seq[k], v_at, p_types[i], c_hash[k], p_bodies[i]);
    INSERT INTO audit.events (chain_id, seq, occurred_at, type, body, prev_hash, hash, task_id,
                              tenant, subject, client, tool, reason, correlation_id,
                              actor_subject, actor_kind)
    VALUES (c_id[k], c_seq[k], v_at, p_types[i], p_bodies[i], c_hash[k], v_hash,
            v_json[i]->>'taskId', v_tenant[i], v_json[i]->>'subject', v_json[i]->>'client',
            v_json[i]->>'tool', v_json[i]->>'reason', v_json[i]->>'correlationId',
            v_json[i]->'actor'->>'subject', v_json[i]->'actor'->>'kind');
    v_seqs := v_seqs || c_seq[k];
    c_hash[k] := v_hash;
    c_at[k] := v_at;
    c_moved[k] := true;
  END LOOP;
  FOR k IN 1 .. coalesce(array_length(c_id, 1), 0) LOOP
    IF c_moved[k] THEN
      UPDATE audit.chains SET head_seq = c_seq[k], head_hash = c_hash[k], head_at = c_at[k]
       WHERE chain_id = c_id[k];
    END IF;
  END LOOP;
  RETURN v_seqs;
END $$;

-- What auditors and the checkpoint job read: every chain's head, with its tenant.
CREATE VIEW audit.chain_heads AS
  SELECT chain_id, tenant, head_seq AS seq, head_hash AS hash, head_at AS occurred_at,
         legacy_until
  FROM audit.chains;

-- The views gain the chain (at the end: CREATE OR REPLACE VIEW may only add columns).
CREATE OR REPLACE VIEW audit.event_log AS
  SELECT seq, occurred_at, type, tenant, subject, client, tool, task_id, reason,
         correlation_id, actor_subject, actor_kind, body, prev_hash, hash, chain_id
  FROM audit.events;

-- The newest event of any chain (its seq is its chain's).
CREATE OR REPLACE VIEW audit.chain_head AS
  SELECT seq, hash, occurred_at, chain_id FROM audit.events
  ORDER BY occurred_at DESC, seq DESC LIMIT 1;

CREATE OR REPLACE VIEW audit.task_timeline AS
  SELECT task_id, seq, occurred_at, type, tenant, subject, client, tool, reason,
         correlation_id, actor_subject, actor_kind,
         (replace(body, '\u0000', '\ufffd')::jsonb) -> 'data' AS data, chain_id
  FROM audit.events
  WHERE task_id IS NOT NULL;

CREATE OR REPLACE VIEW audit.denials AS
  SELECT seq, occurred_at, type, tenant, subject, client, tool, task_id, reason,
         correlation_id,
         (replace(body, '\u0000', '\ufffd')::jsonb) -> 'data' ->> 'verb' AS verb,
         (replace(body, '\u0000', '\ufffd')::jsonb) -> 'data' AS data, chain_id
  FROM audit.events
  WHERE type IN ('task.denied', 'auth.denied');

CREATE OR REPLACE VIEW audit.identity_changes AS
  SELECT seq, occurred_at, type, tenant, subject, client, task_id, reason, correlation_id,
         actor_subject, actor_kind,
         (replace(body, '\u0000', '\ufffd')::jsonb) -> 'data' AS data, chain_id
  FROM audit.events
  WHERE type IN ('task.delegated', 'task.identity_refreshed', 'principal.revoked',
                 'principal.restored');

CREATE OR REPLACE VIEW audit.principal_activity AS
  SELECT tenant, subject AS principal, 'subject'::text AS role, seq, occurred_at, type,
         client, tool, task_id, reason, correlation_id, actor_subject, actor_kind, chain_id
  FROM audit.events
  WHERE subject IS NOT NULL
  UNION ALL
  SELECT tenant, actor_subject, 'actor', seq, occurred_at, type, client, tool, task_id,
         reason, correlation_id, actor_subject, actor_kind, chain_id
  FROM audit.events
  WHERE actor_subject IS NOT NULL AND actor_subject IS DISTINCT FROM subject;

-- Checkpoints of every chain head: `heads` is the signed list [{chain, seq, hash}] sorted by
-- chain, `heads_hash` the SHA-256 over its text (docs/audit.md). Checkpoints from before
-- this migration keep seq and hash (an event of chain 0) and no heads.
ALTER TABLE audit.checkpoints ALTER COLUMN seq DROP NOT NULL;
ALTER TABLE audit.checkpoints ALTER COLUMN hash DROP NOT NULL;
ALTER TABLE audit.checkpoints ADD COLUMN heads jsonb;
ALTER TABLE audit.checkpoints ADD COLUMN heads_hash text CHECK (heads_hash ~ '^[0-9a-f]{64}$');
ALTER TABLE audit.checkpoints ADD CONSTRAINT checkpoints_names_events
  CHECK ((seq IS NOT NULL AND hash IS NOT NULL) OR (heads IS NOT NULL AND heads_hash IS NOT NULL));

CREATE OR REPLACE VIEW audit.checkpoint_log AS
  SELECT id, seq, hash, signed_at, key_id, jws, recorded_at, heads, heads_hash
  FROM audit.checkpoints;

-- The text heads_hash is computed over: one line "chain seq hash" per head, sorted by chain,
-- each ending in LF.
CREATE FUNCTION audit.heads_text(p_heads jsonb) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT coalesce(string_agg((h->>'chain') || ' ' || (h->>'seq') || ' ' || (h->>'hash') || E'\n',
                             '' ORDER BY (h->>'chain')::bigint), '')
  FROM jsonb_array_elements(p_heads) h
$$;

-- Stores a checkpoint of chain heads the job signed, after checking that every head names an
-- event as the chains are now (stored, or a chain's recorded head whose events were archived)
-- and that heads_hash is the hash over them.
CREATE FUNCTION audit.record_checkpoint_heads(p_heads jsonb, p_heads_hash text,
                                              p_signed_at timestamptz, p_key_id text,
                                              p_jws text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, audit AS $$
DECLARE
  v_id bigint;
  v_missing jsonb;
BEGIN
  IF jsonb_typeof(p_heads) IS DISTINCT FROM 'array' OR jsonb_array_length(p_heads) = 0 THEN
    RAISE EXCEPTION 'audit.record_checkpoint_heads: heads must be a non-empty array'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF encode(sha256(convert_to(audit.heads_text(p_heads), 'UTF8')), 'hex') IS DISTINCT FROM p_heads_hash THEN
    RAISE EXCEPTION 'audit.record_checkpoint_heads: heads_hash is not the hash of the heads'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- An event stored, or the chain's recorded head (its events archived since).
  SELECT h INTO v_missing FROM jsonb_array_elements(p_heads) h
   WHERE NOT EXISTS (SELECT 1 FROM audit.events e
                      WHERE e.chain_id = (h->>'chain')::bigint AND e.seq = (h->>'seq')::bigint
                        AND e.hash = h->>'hash')
     AND NOT EXISTS (SELECT 1 FROM audit.chains c
                      WHERE c.chain_id = (h->>'chain')::bigint AND c.head_seq = (h->>'seq')::bigint
                        AND c.head_hash = h->>'hash')
   LIMIT 1;
  IF v_missing IS NOT NULL THEN
    RAISE EXCEPTION 'audit.record_checkpoint_heads: no event % in the chains', v_missing
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  INSERT INTO audit.checkpoints (heads, heads_hash, signed_at, key_id, jws)
  VALUES (p_heads, p_heads_hash, p_signed_at, p_key_id, p_jws)
  RETURNING id INTO v_id;
  RETURN v_id;
END $$;

-- Per partition and chain: the range and the chain values at its edges.
DROP FUNCTION audit.partition_bounds();
CREATE FUNCTION audit.partition_bounds()
RETURNS TABLE (partition text, range_from timestamptz, range_to timestamptz,
               first_seq bigint, first_prev_hash text, last_seq bigint, last_hash text,
               chain_id bigint, events bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, audit AS $$
DECLARE
  p record;
  ch record;
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
    FOR ch IN EXECUTE format(
      'SELECT chain_id, count(*) AS n, min(seq) AS lo, max(seq) AS hi FROM audit.%I GROUP BY chain_id ORDER BY chain_id',
      p.relname)
    LOOP
      chain_id := ch.chain_id;
      events := ch.n;
      first_seq := ch.lo;
      last_seq := ch.hi;
      EXECUTE format('SELECT prev_hash FROM audit.%I WHERE chain_id = $1 AND seq = $2', p.relname)
        INTO first_prev_hash USING ch.chain_id, ch.lo;
      EXECUTE format('SELECT hash FROM audit.%I WHERE chain_id = $1 AND seq = $2', p.relname)
        INTO last_hash USING ch.chain_id, ch.hi;
      RETURN NEXT;
    END LOOP;
    IF NOT FOUND THEN
      chain_id := NULL; events := 0; first_seq := NULL; last_seq := NULL;
      first_prev_hash := NULL; last_hash := NULL;
      RETURN NEXT;
    END IF;
  END LOOP;
END $$;

-- Retention: a closed month is detached once a stored checkpoint covers the last event in it
-- of every chain that has events there.
CREATE OR REPLACE FUNCTION audit.detach_month(p_month date) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, audit SET lock_timeout = '5s' AS $$
DECLARE
  v_name text := 'events_' || to_char(p_month, 'YYYY_MM');
  v_head_at timestamptz;
  v_last_seq bigint;
  v_older text;
  v_uncovered record;
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
  EXECUTE format(
    'SELECT l.chain_id, l.seq FROM (SELECT DISTINCT ON (chain_id) chain_id, seq, hash FROM audit.%I
       ORDER BY chain_id, seq DESC) l
      WHERE NOT EXISTS (SELECT 1 FROM audit.checkpoints k
                         WHERE (l.chain_id = 0 AND k.seq = l.seq AND k.hash = l.hash)
                            OR EXISTS (SELECT 1 FROM jsonb_array_elements(k.heads) h
                                        WHERE h = jsonb_build_object(''chain'', l.chain_id, ''seq'', l.seq, ''hash'', l.hash)))
      ORDER BY l.chain_id LIMIT 1', v_name)
    INTO v_uncovered;
  IF v_uncovered.chain_id IS NOT NULL THEN
    RAISE EXCEPTION 'audit.detach_month: no checkpoint covers the last event of % in chain % (seq %): run npm run audit:checkpoint -- --before % first',
      v_name, v_uncovered.chain_id, v_uncovered.seq,
      to_char((p_month + interval '1 month')::date, 'YYYY-MM-DD');
  END IF;
  EXECUTE format('ALTER TABLE audit.events DETACH PARTITION audit.%I', v_name);
  RETURN v_name;
END $$;

-- An archived month holds a run of every chain with events in it.
ALTER TABLE audit.archives ADD COLUMN chains jsonb;

REVOKE ALL ON audit.chains FROM PUBLIC;
REVOKE ALL ON FUNCTION audit.record_checkpoint_heads(jsonb, text, timestamptz, text, text),
  audit.partition_bounds(), audit.chains_guard() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit.record_checkpoint_heads(jsonb, text, timestamptz, text, text)
  TO mtg_audit_signer;
GRANT EXECUTE ON FUNCTION audit.partition_bounds() TO mtg_auditor, mtg_audit_signer;
GRANT SELECT ON audit.chain_heads TO mtg_auditor, mtg_audit_signer;
