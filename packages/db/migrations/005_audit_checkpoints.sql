-- Signed checkpoints of the audit chain: (seq, hash) of an event, signed with an Ed25519 key
-- that never enters the database (npm run audit:checkpoint; docs/audit.md). A checkpoint
-- kept outside the database proves what the chain was when it was signed: a later rewrite,
-- or a tail deleted behind it, no longer matches.

-- 003 was rewritten before its first release (partitioned, hash chain unchanged). A
-- development database migrated with the earlier 003 cannot take what follows: say so.
DO $$
BEGIN
  IF (SELECT relkind FROM pg_class WHERE oid = 'audit.events'::regclass) <> 'p' THEN
    RAISE EXCEPTION 'audit.events was created by an earlier, unreleased 003_audit_events.sql: '
      'recreate this development database (stop the stack, then delete <DATA_DIR>/postgres)';
  END IF;
END $$;

-- The checkpoint job's role. Like the others, a NOLOGIN group: the job connects with a
-- login that is a member of it, or as the owner and SET ROLE (the dev default).
DO $$
BEGIN
  CREATE ROLE mtg_audit_signer NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;
GRANT USAGE ON SCHEMA audit TO mtg_audit_signer;

CREATE TABLE audit.checkpoints (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  seq         bigint NOT NULL CHECK (seq > 0),
  hash        text NOT NULL CHECK (hash ~ '^[0-9a-f]{64}$'),
  signed_at   timestamptz NOT NULL,
  key_id      text NOT NULL,
  -- Compact JWS (RFC 7515), alg EdDSA; its payload is the authority, the columns above are
  -- copies for querying. audit:verify checks both.
  jws         text NOT NULL,
  recorded_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX checkpoints_seq ON audit.checkpoints (seq);

CREATE TRIGGER checkpoints_no_update BEFORE UPDATE OR DELETE ON audit.checkpoints
  FOR EACH ROW EXECUTE FUNCTION audit.refuse_change();
CREATE TRIGGER checkpoints_no_truncate BEFORE TRUNCATE ON audit.checkpoints
  FOR EACH STATEMENT EXECUTE FUNCTION audit.refuse_change();

-- Stores a checkpoint the job signed, after checking that it names an event of the chain as
-- it is now (the job verified the chain up to it before signing).
CREATE FUNCTION audit.record_checkpoint(p_seq bigint, p_hash text, p_signed_at timestamptz,
                                        p_key_id text, p_jws text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, audit AS $$
DECLARE
  v_id bigint;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM audit.events WHERE seq = p_seq AND hash = p_hash) THEN
    RAISE EXCEPTION 'audit.record_checkpoint: no event % with hash % in the chain', p_seq, p_hash
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  INSERT INTO audit.checkpoints (seq, hash, signed_at, key_id, jws)
  VALUES (p_seq, p_hash, p_signed_at, p_key_id, p_jws)
  RETURNING id INTO v_id;
  RETURN v_id;
END $$;

REVOKE ALL ON audit.checkpoints FROM PUBLIC;
REVOKE ALL ON FUNCTION audit.record_checkpoint(bigint, text, timestamptz, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit.record_checkpoint(bigint, text, timestamptz, text, text),
  audit.ensure_partitions(integer) TO mtg_audit_signer;
