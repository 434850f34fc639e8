-- Upstream MCP servers (UPSTREAMS_FILE) contribute tools. What each upstream last listed is
-- kept here, so every gateway replica and every worker serves the same catalogue, and an
-- upstream that is down is served from its last good listing (docs/upstreams.md).
CREATE TABLE app.upstream_tools (
  upstream text NOT NULL,
  -- The name the gateway serves (prefix + the upstream's name) and the upstream's own.
  name text NOT NULL,
  upstream_name text NOT NULL,
  title text,
  description text NOT NULL DEFAULT '',
  input_schema jsonb NOT NULL,
  -- execution.taskSupport as the upstream advertised it: forbidden | optional | required.
  task_support text NOT NULL DEFAULT 'forbidden'
    CHECK (task_support IN ('forbidden', 'optional', 'required')),
  -- Hash of what the listing said: gateway and workers compare it (docs/upstreams.md).
  fingerprint text NOT NULL,
  discovered_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (upstream, name)
);
CREATE UNIQUE INDEX upstream_tools_name ON app.upstream_tools (name);

-- One row per upstream: when its listing last succeeded or failed, and why.
CREATE TABLE app.upstream_status (
  upstream text PRIMARY KEY,
  last_success_at timestamptz,
  last_failure_at timestamptz,
  last_error text
);

GRANT SELECT, INSERT, UPDATE, DELETE ON app.upstream_tools, app.upstream_status TO mtg_gateway;
GRANT SELECT ON app.upstream_tools, app.upstream_status TO mtg_worker;
