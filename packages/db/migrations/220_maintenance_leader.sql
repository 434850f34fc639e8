-- The maintenance leader (packages/runner/src/maintenance.ts) is the worker whose session
-- holds an EXCLUSIVE lock on this view; the others wait for that lock with LOCK TABLE.
-- Until now they waited in `SELECT pg_advisory_lock(…)`, a statement that holds a snapshot
-- for as long as it waits (up to 30 s, again and again): each follower's backend_xmin held
-- PostgreSQL's cleanup horizon back, so no dead row version newer than it could be pruned
-- or vacuumed, nor its index entries marked dead, anywhere in the database. With 8 workers
-- the task path's statements read 6–9 times the buffers they read with one. LOCK takes no
-- snapshot, and a transaction that has only taken a lock has no xid: neither the waiters
-- nor the leader (idle in its transaction) hold the horizon back.
-- A view, not a table: VACUUM and ANALYZE (SHARE UPDATE EXCLUSIVE, which EXCLUSIVE
-- conflicts with) never lock a view, and pg_dump locks tables only. EXCLUSIVE, not ACCESS
-- EXCLUSIVE: that mode is WAL-logged for standbys and gives its transaction an xid.
CREATE VIEW app.maintenance_leader AS SELECT 1 AS leader;
COMMENT ON VIEW app.maintenance_leader IS
  'Held in EXCLUSIVE mode by the maintenance leader''s open transaction; read by nobody.';
-- LOCK TABLE in EXCLUSIVE mode needs UPDATE (or DELETE or TRUNCATE) on the relation.
GRANT UPDATE ON app.maintenance_leader TO mtg_worker;
