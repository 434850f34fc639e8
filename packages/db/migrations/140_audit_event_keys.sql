-- Event keys: an append whose outcome its writer does not know (the connection broke after
-- the statement was sent, before its answer) can be sent again without a second copy of the
-- event in the chain (docs/audit.md, "Unknown commit outcomes").
--
-- * audit.events gets event_key, a uuid the writer generates per event. NULL for every event
--   written before, and for appends inside a transaction of the caller's, whose retry is
--   decided by the change they record (the journal row, the settlement).
-- * audit.append_many(types, bodies, keys, retry): stores each event's key; on a retry (the
--   events may have been sent before), an event whose key its chain already holds is not
--   appended again, and the call returns that event's seq in its place. The lookup runs
--   under the chain's lock, so it sees every committed append of the chain (a first attempt
--   still in flight holds the lock: the retry waits for its outcome). A first attempt looks
--   nothing up: its keys are new. Nothing else changes: the key is not in the body and not
--   in the hash (the stored event is the one that committed; verifying a chain is unchanged).
-- * Keys are looked up among the last day's events (a writer retries within seconds): the
--   lookup touches this month's partition, and last month's at most. The writer's keys are
--   time-ordered (UUIDv7), so the index grows at its right edge as seq does.
-- * The two-argument append_many is the four-argument one without keys.

-- A column without a default: no row is rewritten.
ALTER TABLE audit.events ADD COLUMN event_key uuid;
-- On the partitioned table: every partition gets it, and ensure_partition's ATTACH creates
-- it on each new month.
CREATE INDEX events_key ON audit.events (chain_id, event_key) WHERE event_key IS NOT NULL;

-- Appends p_types[i] / p_bodies[i] in order, each with its key p_keys[i] (NULL: none);
-- returns each event's seq in its chain. With p_retry, an event whose key its chain already
-- holds is not appended; its stored seq is returned instead.
CREATE FUNCTION audit.append_many(p_types text[], p_bodies text[], p_keys uuid[],
                                  p_retry boolean) RETURNS bigint[]
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
  v_one text;
  v_single boolean := true;
  -- Keys are looked up among the events since (partition pruning: this month, or two).
  v_since timestamptz := now() - interval '1 day';
  v_found bigint;
BEGIN
  IF v_n <> coalesce(array_length(p_bodies, 1), 0) THEN
    RAISE EXCEPTION 'audit.append_many: % types but % bodies', v_n,
      coalesce(array_length(p_bodies, 1), 0) USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF p_keys IS NOT NULL AND coalesce(array_length(p_keys, 1), 0) <> v_n THEN
    RAISE EXCEPTION 'audit.append_many: % events but % keys', v_n,
      coalesce(array_length(p_keys, 1), 0) USING ERRCODE = 'invalid_parameter_value';
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
  -- Almost every call appends for one tenant (or only system events): its chain is found,
  -- created and locked with statements on a scalar, which PostgreSQL plans once per
  -- session. The general path's statements over the tenant array are planned again on every
  -- call (their row estimates from a generic plan are worse than a custom plan's).
  v_one := v_tenant[1];
  FOR i IN 2 .. v_n LOOP
    IF v_tenant[i] IS DISTINCT FROM v_one THEN
      v_single := false;
      EXIT;
    END IF;
  END LOOP;
  IF v_single AND v_one IS NULL THEN
    SELECT chain_id, tenant, head_seq, head_hash, head_at INTO r FROM audit.chains
     WHERE chain_id = 0 FOR UPDATE;
    c_id := ARRAY[r.chain_id]; c_tenant := ARRAY[r.tenant]; c_seq := ARRAY[r.head_seq];
    c_hash := ARRAY[r.head_hash]; c_at := ARRAY[r.head_at]; c_moved := ARRAY[false];
  ELSIF v_single THEN
    -- A tenant's first event creates its chain (before any lock, as below).
    IF NOT EXISTS (SELECT 1 FROM audit.chains WHERE tenant = v_one) THEN
      INSERT INTO audit.chains (chain_id, tenant) VALUES (nextval('audit.chain_ids'), v_one)
      ON CONFLICT (tenant) DO NOTHING;
    END IF;
    SELECT chain_id, tenant, head_seq, head_hash, head_at INTO r FROM audit.chains
     WHERE tenant = v_one FOR UPDATE;
    c_id := ARRAY[r.chain_id]; c_tenant := ARRAY[r.tenant]; c_seq := ARRAY[r.head_seq];
    c_hash := ARRAY[r.head_hash]; c_at := ARRAY[r.head_at]; c_moved := ARRAY[false];
  ELSE
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
  END IF;
  FOR i IN 1 .. v_n LOOP
    k := array_position(c_tenant, v_tenant[i]);  -- array_position finds NULL too
    IF k IS NULL THEN
      RAISE EXCEPTION 'audit.append_many: no chain for tenant %', v_tenant[i];
    END IF;
    -- Under the chain's lock: an event of this key committed by an earlier attempt is the
    -- one; the chain does not get a second copy.
    IF p_retry AND p_keys[i] IS NOT NULL THEN
      SELECT seq INTO v_found FROM audit.events
       WHERE chain_id = c_id[k] AND event_key = p_keys[i] AND occurred_at >= v_since;
      IF FOUND THEN
        v_seqs := v_seqs || v_found;
        CONTINUE;
      END IF;
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
                              actor_subject, actor_kind, event_key)
    VALUES (c_id[k], c_seq[k], v_at, p_types[i], p_bodies[i], c_hash[k], v_hash,
            v_json[i]->>'taskId', v_tenant[i], v_json[i]->>'subject', v_json[i]->>'client',
            v_json[i]->>'tool', v_json[i]->>'reason', v_json[i]->>'correlationId',
            v_json[i]->'actor'->>'subject', v_json[i]->'actor'->>'kind', p_keys[i]);
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

-- Without keys, as before (audit.append and every append inside a caller's transaction).
CREATE OR REPLACE FUNCTION audit.append_many(p_types text[], p_bodies text[]) RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, audit AS $$
BEGIN
  RETURN audit.append_many(p_types, p_bodies, NULL::uuid[], false);
END $$;

REVOKE ALL ON FUNCTION audit.append_many(text[], text[], uuid[], boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit.append_many(text[], text[], uuid[], boolean)
  TO mtg_gateway, mtg_worker;
