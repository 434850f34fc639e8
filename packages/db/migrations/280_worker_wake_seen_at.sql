-- When a worker last announced its own wake-up channel (migration 270). A worker of an
-- earlier release upserts its row without touching wake_channel: if it reuses the id of a
-- worker of this release that was killed (no graceful stop deletes the row) within the live
-- window, the row keeps a channel nobody LISTENs on, and a task chosen for it would wait for
-- the maintenance leader's re-announcement. This release's announcement sets wake_seen_at with
-- seen_at; a gateway trusts wake_channel only while the two are equal, that is while the last
-- announcement was one that knew the column. The default covers a row inserted whole by an
-- earlier release (its wake_channel is NULL anyway) and the test fixtures' plain inserts.
ALTER TABLE app.workers ADD COLUMN IF NOT EXISTS wake_seen_at timestamptz DEFAULT now();
