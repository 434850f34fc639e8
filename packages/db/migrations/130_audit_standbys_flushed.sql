-- A checkpoint must never sign what a failover can lose. With asynchronous replication the
-- last commits on the primary may not be on any standby yet; a head signed then and lost in
-- a failover would make the verifier report a cut tail that no one made. The signer asks how
-- many streaming standbys have flushed the WAL up to the position it read the heads at, and
-- signs only once enough have (docs/audit.md, "Checkpoints and replication").
-- pg_stat_replication's positions are visible to superusers and pg_read_all_stats members
-- only: the function runs as its owner, the migrating role; on a managed database give that
-- role pg_read_all_stats (or pg_monitor), else it sees no standby and the signer, when it is
-- told to wait for one, refuses to sign.
CREATE FUNCTION audit.standbys_flushed(p_upto pg_lsn) RETURNS integer
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog AS $$
  SELECT count(*)::integer FROM pg_stat_replication
   WHERE state = 'streaming' AND flush_lsn IS NOT NULL AND flush_lsn >= p_upto
$$;
REVOKE ALL ON FUNCTION audit.standbys_flushed(pg_lsn) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION audit.standbys_flushed(pg_lsn) TO mtg_audit_signer;
