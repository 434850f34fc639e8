-- The console ends a revoked principal's sessions and refuses their login, reading the same
-- store the gateway and the workers check (written by the Shared Signals receiver and the
-- admin API) on every request. Only the columns that answer "is this person revoked, and
-- since when": not who revoked them or why (that is in the audit trail, for the tenant's
-- auditors).
GRANT SELECT (tenant, subject, revoked, revoked_at) ON app.principals TO mtg_console;
