/**
 * Whether an error means PostgreSQL cannot be reached or is going away (restart, failover,
 * connection limit), as opposed to a fault in the statement. Callers answer these with
 * "temporarily unavailable, retry" (HTTP 503 + Retry-After) rather than an internal error.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === 'string') {
    // Socket errors, and SQLSTATE class 08 (connection exception), 57P01-03 (admin or crash
    // shutdown, cannot connect now) and 53300 (too many connections).
    if (/^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|EHOSTUNREACH)$/.test(code))
      return true;
    if (/^08/.test(code) || /^57P0[123]$/.test(code) || code === '53300') return true;
  }
  return (
    typeof message === 'string' &&
    /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection refused|the database system is (starting up|shutting down|in recovery mode)/i.test(
      message,
    )
  );
}
