-- Tools an upstream listed that the gateway does not serve (docs/upstreams.md, "Names"): a
-- name reserved for the gateway's own tools, past the upstream's maxTools, an invalid or
-- repeated name, or a name another upstream serves. Each listing replaces its upstream's rows,
-- so this is what the latest listing refused; the console's queues page shows it.
CREATE TABLE app.upstream_refused_tools (
  upstream text NOT NULL,
  -- The upstream's own name for the tool, and the name it would have been served under.
  upstream_name text NOT NULL,
  name text,
  reason text NOT NULL
    CHECK (reason IN ('reserved_name', 'over_cap', 'invalid_name', 'duplicate_name', 'name_taken')),
  refused_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (upstream, upstream_name)
);

GRANT SELECT, INSERT, UPDATE, DELETE ON app.upstream_refused_tools TO mtg_gateway;

-- The console reads it through a view, as it reads the queues (060_console.sql).
CREATE VIEW app.console_upstream_refusals AS
  SELECT upstream, upstream_name, name, reason, refused_at FROM app.upstream_refused_tools;
GRANT SELECT ON app.console_upstream_refusals TO mtg_console;
