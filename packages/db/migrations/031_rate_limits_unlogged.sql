-- Rate-limit counters are refreshed every window and worth nothing after a crash, so they
-- need no WAL: UNLOGGED spares every start and poll a WAL record and its flush. After a crash
-- PostgreSQL empties the table (every caller's window restarts: a few requests more may pass
-- once) and a streaming replica has none of it (after a failover, the same). The audit trail
-- and the tasks stay logged, of course.
ALTER TABLE app.rate_limits SET UNLOGGED;
