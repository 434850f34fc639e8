-- Per-caller rate-limit counters, shared by every gateway replica (rate-limiter-flexible's
-- RateLimiterPostgres, created here with `tableCreated: true` so the gateway never needs
-- CREATE at run time). The library writes positionally: the column order is its contract.
-- `key` is "<limit>:<sha256 of the caller>" (no subject or client in clear); `expire` is the
-- end of the current window in epoch milliseconds. Rows are tiny and short-lived; the
-- library deletes those expired for an hour every five minutes (hence DELETE).
CREATE TABLE app.rate_limits (
  key    varchar(255) PRIMARY KEY,
  points integer NOT NULL DEFAULT 0,
  expire bigint
);
GRANT SELECT, INSERT, UPDATE, DELETE ON app.rate_limits TO mtg_gateway;
