-- Principals the gateway has been told to stop acting for (Shared Signals, admin API).
-- A row with revoked_at set and restored_at NULL (or older) means: no new work, no reads,
-- running work stops at its next boundary.
CREATE TABLE app.principals (
  tenant      text NOT NULL,
  subject     text NOT NULL,
  revoked     boolean NOT NULL DEFAULT false,
  revoked_at  timestamptz,
  revoked_by  jsonb,          -- { "path": "ssf:account-disabled" | "admin", "by": ..., "jti": ... }
  restored_at timestamptz,
  restored_by jsonb,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, subject)
);
GRANT SELECT, INSERT, UPDATE ON app.principals TO mtg_gateway;
GRANT SELECT ON app.principals TO mtg_worker;

-- Security Event Tokens already processed (RFC 8935 replay protection), kept past the
-- freshness window.
CREATE TABLE app.received_sets (
  issuer      text NOT NULL,
  jti         text NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (issuer, jti)
);
GRANT SELECT, INSERT, DELETE ON app.received_sets TO mtg_gateway;

-- The task-bound delegation credential: the result of exchanging the creating user's token
-- at start (audience = the worker service, scope = the tool's, lifetime ≤ the deadline).
-- Encrypted with AES-256-GCM under a key named by key_id (rotation); deleted when the task
-- ends. The user's own token is never stored anywhere.
CREATE TABLE app.task_credentials (
  task_id     text PRIMARY KEY REFERENCES app.tasks (id) ON DELETE CASCADE,
  key_id      text NOT NULL,
  iv          bytea NOT NULL,
  ciphertext  bytea NOT NULL,
  tag         bytea NOT NULL,
  expires_at  timestamptz NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT, INSERT, UPDATE, DELETE ON app.task_credentials TO mtg_gateway;
GRANT SELECT, DELETE ON app.task_credentials TO mtg_worker;

-- Checkpoint mode: a tool that needs a live user at each stage runs one stage per grant.
-- Creation grants the first; each authorized poll by the owner with a fresh token grants the
-- next (and refreshes the delegation).
ALTER TABLE app.tasks ADD COLUMN needs_live_user boolean NOT NULL DEFAULT false;
ALTER TABLE app.tasks ADD COLUMN stage_grants integer NOT NULL DEFAULT 0;
