/**
 * A PostgreSQL failure by its stable code, as the callers decide on it:
 * - `database_unavailable`: PostgreSQL cannot be reached or is going away (restart,
 *   failover, connection limit), not a fault of the statement. Callers answer "temporarily
 *   unavailable, retry" (HTTP 503 + Retry-After, JSON-RPC `unavailable`).
 * - `database_statement_failed`: the server refused the statement (a SQLSTATE of another
 *   class): a bug, whose driver text stays in the log.
 */
export type DatabaseFailure =
  { code: 'database_unavailable' } | { code: 'database_statement_failed'; sqlState: string };

export type DatabaseFailureCode = DatabaseFailure['code'];

// Socket errors, and SQLSTATE class 08 (connection exception), 57P01-03 (admin or crash
// shutdown, cannot connect now), 53300 (too many connections) and 25006 (read-only
// transaction: the connection reached a server that is not the primary, or no longer is:
// the old primary of a switchover, demoted under its open sessions, or a stale endpoint).
// The pool drops a connection that fails so, and the next one reaches the new primary.
const UNREACHABLE = /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|EHOSTUNREACH)$/;
const UNAVAILABLE_STATE = /^(08...|57P0[123]|53300|25006)$/;
const SQLSTATE = /^[0-9A-Z]{5}$/;
// node-postgres raises these without any code (pg-pool's connect timeout, a statement
// unanswered past the pool's query timeout, a connection ended under a query, a server that
// is starting or stopping). One more has a code too generic to go by (0A000, feature not
// supported): a server in recovery refusing to read an UNLOGGED table (the status-read marks,
// the rate-limit counters) — a session on a standby, the demoted primary of a switchover or a
// node not yet done promoting, which is an outage as 25006 is. This is the one place that
// reads the driver's text: it turns them into a code, and nothing else looks at messages.
const DRIVER_UNAVAILABLE =
  /Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Connection refused|the database system is (starting up|shutting down|in recovery mode)|cannot access temporary or unlogged relations during recovery/i;

/** The failure `error` is, when it came from the database driver; undefined otherwise. */
export function databaseFailureOf(error: unknown): DatabaseFailure | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, message, severity } = error as {
    code?: unknown;
    message?: unknown;
    severity?: unknown;
  };
  if (typeof code === 'string' && (UNREACHABLE.test(code) || UNAVAILABLE_STATE.test(code)))
    return { code: 'database_unavailable' };
  if (typeof message === 'string' && DRIVER_UNAVAILABLE.test(message))
    return { code: 'database_unavailable' };
  if (typeof code === 'string' && SQLSTATE.test(code) && typeof severity === 'string')
    return { code: 'database_statement_failed', sqlState: code };
  return undefined;
}
