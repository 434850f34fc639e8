-- Tools are brought by packs (TOOL_PACKS): each task records which version of its tool the
-- creating gateway served, and the pg-boss queue it was sent to (one queue per tool and input
-- schema), so a worker only ever fetches work it can run.
ALTER TABLE app.tasks
  ADD COLUMN job_queue text NOT NULL DEFAULT 'task-run',
  ADD COLUMN tool_version text,
  ADD COLUMN tool_fingerprint text,
  ADD COLUMN registry_fingerprint text;

-- Live workers and the queues they serve: a task whose queue no live worker serves says so
-- in its status ("waiting for a worker that runs X") instead of looking merely queued.
CREATE TABLE app.workers (
  id text PRIMARY KEY,
  queues text[] NOT NULL,
  registry_fingerprint text NOT NULL,
  started_at timestamptz NOT NULL DEFAULT now(),
  seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workers_seen_at ON app.workers (seen_at);

GRANT SELECT, INSERT, UPDATE, DELETE ON app.workers TO mtg_worker;
GRANT SELECT ON app.workers TO mtg_gateway;
