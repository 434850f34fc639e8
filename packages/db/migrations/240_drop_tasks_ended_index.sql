-- tasks_purge (migration 002, app.tasks (ended_at) over ended tasks) served the retention
-- purge, which found its rows by ended_at + ttl_ms. Since migration 190 the purge reads
-- tasks_purge_at instead, and no statement reads ended_at through an index: it is compared
-- per row only (the run's NOT_ENDED, ended_at IS NULL, uses the primary key). Every ending
-- still wrote an entry into it, one per task, and it held one entry per retained ended task
-- (about 30 MB with a million). Dropping it takes app.tasks' exclusive lock for a moment, as
-- any DROP INDEX does; a release without this migration never names the index.
DROP INDEX IF EXISTS app.tasks_purge;
