-- Group commit (packages/audit/src/group-commit.ts): several events appended in one call,
-- one transaction, one hold of the chain lock, one read of the chain head. append() becomes
-- the one-event case of append_many(), so there is a single implementation of the chain.
-- The chained hash, the columns and every check are exactly those of 003_audit_events.sql.

-- Appends p_types[i] / p_bodies[i] in order; returns their sequence numbers in that order.
-- Any invalid event fails the whole call (the caller's transaction), as one append() would.
CREATE FUNCTION audit.append_many(p_types text[], p_bodies text[]) RETURNS bigint[]
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, audit AS $$
DECLARE
  v_last record;
  v_seq bigint;
  v_prev text;
  v_at timestamptz;
  v_last_at timestamptz;
  v_hash text;
  v_json jsonb;
  v_seqs bigint[] := '{}';
  v_n integer := coalesce(array_length(p_types, 1), 0);
BEGIN
  IF v_n <> coalesce(array_length(p_bodies, 1), 0) THEN
    RAISE EXCEPTION 'audit.append_many: % types but % bodies', v_n,
      coalesce(array_length(p_bodies, 1), 0) USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF v_n = 0 THEN
    RETURN v_seqs;
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
  v_seq := COALESCE(v_last.seq, 0);
  v_prev := COALESCE(v_last.hash, repeat('0', 64));
  v_last_at := v_last.occurred_at;
  FOR i IN 1 .. v_n LOOP
    -- jsonb refuses \u0000; it is replaced for the query columns only, the hash covers the
    -- body exactly as given.
    v_json := replace(p_bodies[i], '\u0000', '\ufffd')::jsonb;
    IF jsonb_typeof(v_json) IS DISTINCT FROM 'object' THEN
      RAISE EXCEPTION 'audit.append: the body must be a JSON object' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_seq := v_seq + 1;
    -- Taken under the lock and never behind the previous event, so occurred_at grows with
    -- seq and each month's partition holds one contiguous run of events.
    v_at := greatest(clock_timestamp(), v_last_at);
    IF v_last_at IS NULL
       OR date_trunc('month', v_at, 'UTC') <> date_trunc('month', v_last_at, 'UTC') THEN
      PERFORM audit.ensure_partition(v_at);
    END IF;
    v_hash := audit.event_hash(v_seq, v_at, p_types[i], v_prev, p_bodies[i]);
    INSERT INTO audit.events (seq, occurred_at, type, body, prev_hash, hash, task_id, tenant,
                              subject, client, tool, reason, correlation_id, actor_subject,
                              actor_kind)
    VALUES (v_seq, v_at, p_types[i], p_bodies[i], v_prev, v_hash, v_json->>'taskId',
            v_json->>'tenant', v_json->>'subject', v_json->>'client', v_json->>'tool',
            v_json->>'reason', v_json->>'correlationId', v_json->'actor'->>'subject',
            v_json->'actor'->>'kind');
    v_seqs := v_seqs || v_seq;
    v_prev := v_hash;
    v_last_at := v_at;
  END LOOP;
  RETURN v_seqs;
END $$;

-- The one-event case, same signature and grants as before.
CREATE OR REPLACE FUNCTION audit.append(p_type text, p_body text) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, audit AS $$
  SELECT (audit.append_many(ARRAY[p_type], ARRAY[p_body]))[1]
$$;

REVOKE ALL ON FUNCTION audit.append_many(text[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit.append_many(text[], text[]) TO mtg_gateway, mtg_worker;
