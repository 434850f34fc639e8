-- audit.append_many's common case, one tenant per call, without re-planning: the statements
-- that create and lock the chains of a call were written over the array of its tenants, and
-- PostgreSQL planned them again on every call (about 0.15 ms each, six calls per task). A
-- call whose events share one tenant (or are all system events) now finds, creates and locks
-- its chain with statements on that one value; a call of several tenants takes the path of
-- 080 unchanged. What is written, the hash and the lock order are unchanged.

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
  v_one text;
  v_single boolean := true;
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
