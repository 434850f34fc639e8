-- Durable tasks. One row per long tool call, whatever wire started it. The row binds the
-- principal that created it; every later verb is authorized against these columns.
CREATE TABLE app.tasks (
  id               text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{32}$'),  -- 128 random bits, hex
  issuer           text NOT NULL,
  tenant           text NOT NULL,
  subject          text NOT NULL,
  client           text NOT NULL,
  scopes           text[] NOT NULL,           -- scopes granted to the creating token
  tool             text NOT NULL,
  arguments        jsonb NOT NULL,            -- validated arguments (never a token)
  argument_summary jsonb NOT NULL,            -- redacted, for audit and listings
  argument_hash    text NOT NULL,             -- sha256 of tool + canonical arguments
  idempotency_key  text NOT NULL,
  idempotency_kind text NOT NULL CHECK (idempotency_kind IN ('explicit', 'derived')),
  -- The key while it still deduplicates; NULL once its window has passed (derived keys)
  -- so a legitimate re-run can start. Unique per principal: check-and-create is one INSERT.
  dedupe_key       text,
  dedupe_until     timestamptz,               -- NULL: for as long as the row is retained
  correlation_id   text NOT NULL,
  status           text NOT NULL DEFAULT 'working'
                   CHECK (status IN ('working', 'input_required', 'completed', 'failed', 'cancelled')),
  status_message   text,
  progress         jsonb,                     -- { "current": n, "total": m }
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  started_at       timestamptz,
  ended_at         timestamptz,
  deadline         timestamptz NOT NULL,
  ttl_ms           bigint NOT NULL CHECK (ttl_ms > 0),   -- retention of the task after it ends
  poll_interval_ms integer NOT NULL DEFAULT 1000,
  -- Who/why for terminal states, and the cancel request that precedes a cancel.
  outcome          text,       -- completed | tool_error | failed | deadline | cancelled | revoked
  ended_by         jsonb,      -- { "path": "owner|admin|revocation|deadline|worker", "subject", "client", "reason" }
  cancel_requested_at timestamptz,
  cancel_requested_by jsonb,
  -- Fenced lease: a worker owns the task while lease_epoch is its own; a takeover bumps the
  -- epoch, and every write by the old owner carries its epoch and so matches nothing.
  lease_owner      text,
  lease_epoch      bigint NOT NULL DEFAULT 0,
  lease_expires_at timestamptz,
  job_id           uuid,
  attempts         integer NOT NULL DEFAULT 0,
  dedupe_window_ms bigint,     -- derived keys: how long the key still dedupes after the end
  CONSTRAINT terminal_has_end CHECK (
    (status IN ('completed', 'failed', 'cancelled')) = (ended_at IS NOT NULL))
);

CREATE UNIQUE INDEX tasks_dedupe ON app.tasks (tenant, subject, client, dedupe_key)
  WHERE dedupe_key IS NOT NULL;
-- Owner listings, newest first, and the active-task caps.
CREATE INDEX tasks_owner ON app.tasks (tenant, subject, client, created_at DESC, id);
CREATE INDEX tasks_active_tenant ON app.tasks (tenant, subject)
  WHERE status IN ('working', 'input_required');
CREATE INDEX tasks_deadline ON app.tasks (deadline) WHERE status IN ('working', 'input_required');
CREATE INDEX tasks_purge ON app.tasks (ended_at) WHERE ended_at IS NOT NULL;

-- The step journal: each completed step's output, so a resumed job skips finished work.
CREATE TABLE app.task_steps (
  task_id      text NOT NULL REFERENCES app.tasks (id) ON DELETE CASCADE,
  step         text NOT NULL,
  seq          integer NOT NULL,
  output       jsonb NOT NULL,
  lease_epoch  bigint NOT NULL,
  worker       text NOT NULL,
  started_at   timestamptz NOT NULL,
  completed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (task_id, step)
);

-- Results live apart from the task, with their own retention; optionally deleted on read.
CREATE TABLE app.task_results (
  task_id     text PRIMARY KEY REFERENCES app.tasks (id) ON DELETE CASCADE,
  result      jsonb NOT NULL,       -- exactly the CallToolResult the tool produced
  is_error    boolean NOT NULL,
  size_bytes  integer NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  delete_on_read boolean NOT NULL DEFAULT false
);
CREATE INDEX task_results_expiry ON app.task_results (expires_at);

GRANT SELECT, INSERT, UPDATE ON app.tasks TO mtg_gateway, mtg_worker;
GRANT DELETE ON app.tasks TO mtg_worker;                -- the retention purge
GRANT SELECT ON app.task_steps TO mtg_gateway;
GRANT SELECT, INSERT ON app.task_steps TO mtg_worker;
GRANT SELECT, DELETE ON app.task_results TO mtg_gateway;  -- delete-on-read
GRANT SELECT, INSERT, DELETE ON app.task_results TO mtg_worker;
