-- The demo downstream system's own records (it would be a separate database in real life).
-- Every accepted write, once per idempotency key, with who it was done for and by whom.
CREATE TABLE downstream.writes (
  idempotency_key text PRIMARY KEY,
  task_id     text NOT NULL,
  method      text NOT NULL,
  path        text NOT NULL,
  body        jsonb NOT NULL,
  sub         text NOT NULL,     -- the token's subject: the user (or the worker itself)
  act         jsonb,             -- RFC 8693 actor chain, null for a token without one
  client      text,
  at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX writes_task ON downstream.writes (task_id, at);
GRANT SELECT, INSERT ON downstream.writes TO mtg_downstream;
