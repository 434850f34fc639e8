-- What operations watch and record about the audit chain (docs/operations.md, "Alerts",
-- "Audit archival"):
-- * the newest signed checkpoint's time and the last verification, readable by the gateway
--   and the workers for their metrics (they may not read audit.checkpoints itself);
-- * audit.verifications: each audit:verify / audit:archive run's verdict, appended by the
--   signer role (append-only like the chain);
-- * audit.archives: each month exported and detached, with the export's digest.

CREATE FUNCTION audit.last_checkpoint_at() RETURNS timestamptz
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, audit AS $$
  SELECT max(signed_at) FROM audit.checkpoints
$$;

CREATE TABLE audit.verifications (
  id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  ran_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
  kind     text NOT NULL CHECK (kind IN ('verify', 'archive')),
  ok       boolean NOT NULL,
  head_seq bigint,
  failure  text CHECK (length(failure) <= 500)
);
CREATE TRIGGER verifications_no_update BEFORE UPDATE OR DELETE ON audit.verifications
  FOR EACH ROW EXECUTE FUNCTION audit.refuse_change();

CREATE FUNCTION audit.record_verification(p_kind text, p_ok boolean, p_head_seq bigint,
                                          p_failure text) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, audit AS $$
  INSERT INTO audit.verifications (kind, ok, head_seq, failure)
  VALUES (p_kind, p_ok, p_head_seq, left(p_failure, 500)) RETURNING id
$$;

CREATE FUNCTION audit.last_verification() RETURNS TABLE (ran_at timestamptz, ok boolean)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, audit AS $$
  SELECT ran_at, ok FROM audit.verifications ORDER BY id DESC LIMIT 1
$$;

CREATE TABLE audit.archives (
  partition      text PRIMARY KEY,
  first_seq      bigint NOT NULL,
  last_seq       bigint NOT NULL,
  events         bigint NOT NULL,
  checkpoint_seq bigint NOT NULL,
  sha256         text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  file           text NOT NULL,
  archived_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TRIGGER archives_no_update BEFORE UPDATE OR DELETE ON audit.archives
  FOR EACH ROW EXECUTE FUNCTION audit.refuse_change();

REVOKE ALL ON audit.verifications, audit.archives FROM PUBLIC;
REVOKE ALL ON FUNCTION audit.last_checkpoint_at(), audit.last_verification(),
  audit.record_verification(text, boolean, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit.last_checkpoint_at(), audit.last_verification()
  TO mtg_gateway, mtg_worker, mtg_auditor, mtg_audit_signer;
GRANT EXECUTE ON FUNCTION audit.record_verification(text, boolean, bigint, text)
  TO mtg_audit_signer;
GRANT SELECT ON audit.archives, audit.verifications TO mtg_auditor;
