import pg from 'pg';
import { databaseFailureOf } from './database-failure.ts';

export type Pool = pg.Pool;
export interface PoolOptions {
  connectionString: string;
  /** Role to SET on each new connection; omit to keep the connecting user. */
  role?: string;
  max?: number;
  applicationName?: string;
  /**
   * Plan every prepared statement once per connection (`plan_cache_mode =
   * force_generic_plan`). PostgreSQL otherwise keeps planning a statement on every call when
   * a plan for the actual values looks cheaper, which the task path's statements always do
   * (their `$n IS NULL OR …` and `COALESCE($n, …)` fold away in such a plan) though every one
   * of them is a lookup by key either way: planning was about a tenth of PostgreSQL's time
   * per task. For pools whose statements are all lookups by key (the gateway's, the
   * workers'); not for ad-hoc reporting queries.
   */
  genericPlans?: boolean;
  /**
   * How long a statement may go unanswered before the client gives up on it and the pool
   * drops the connection (node-postgres `query_timeout`). A database that is cut off (a
   * partition, a failed-over primary whose packets are dropped) answers nothing, not even an
   * error: without it a request would hang until TCP itself gives up, minutes later.
   * Unset: no limit (for pools whose statements may run long: migrations, verify, archive).
   */
  queryTimeoutMs?: number;
  /** How long an idle connection stays in the pool (default IDLE_CONNECTION_MS). */
  idleTimeoutMs?: number;
}

/**
 * An idle connection is kept a minute, not node-postgres's 10 s. A session carries what the
 * next request would otherwise pay for again: the backend process and its authentication,
 * the catalog caches it has built, and every prepared statement with its plan (the task
 * path's statements are all prepared). With 10 s, every burst after a pause of 10 s reopened
 * the pool: in the cost bench, the batches that followed an 11 s pause cost PostgreSQL about
 * twice the CPU per start of those that did not (docs/scaling.md, "The cost of one task").
 * The pool's `max` still bounds the sessions held.
 */
export const IDLE_CONNECTION_MS = 60_000;

// int8 (bigint) as a JS number is safe for our sequences (< 2^53); counts come back as numbers.
pg.types.setTypeParser(20, (v) => Number(v));

/** Server-side TCP keepalives of every application session: 10 s idle, 3 probes 5 s apart. */
export const SERVER_KEEPALIVES = [
  '-c tcp_keepalives_idle=10',
  '-c tcp_keepalives_interval=5',
  '-c tcp_keepalives_count=3',
];

export function createPool(options: PoolOptions): Pool {
  const startup = [
    ...(options.role ? [`-c role=${options.role}`] : []),
    // The server's side of the same: a session whose client vanished (a worker cut off by a
    // partition) ends within ~25 s instead of the kernel's two hours, and with it the
    // session's advisory locks (the maintenance leader's), so another process can take over.
    ...SERVER_KEEPALIVES,
    ...(options.genericPlans ? ['-c plan_cache_mode=force_generic_plan'] : []),
  ];
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.max ?? 10,
    application_name: options.applicationName,
    // Fail fast instead of hanging on a dead database; callers retry.
    connectionTimeoutMillis: 5000,
    idleTimeoutMillis: options.idleTimeoutMs ?? IDLE_CONNECTION_MS,
    ...(options.queryTimeoutMs ? { query_timeout: options.queryTimeoutMs } : {}),
    // TCP keepalives from our side too, so a connection to a server that vanished (a
    // failover's old primary) is found dead by the kernel rather than kept forever.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    // Startup parameters, so every session is under them before its first query.
    options: startup.join(' '),
  });
  // A client losing its connection (database restart) must not crash the process: the
  // pool's listener covers idle clients only, so give every client its own. The query in
  // flight still rejects, and callers retry.
  pool.on('error', () => {});
  // A connection a statement found unusable — cut, unanswered, or on a server that is no
  // longer the primary (a switchover demotes the old primary under its open sessions) — is
  // ended when it is released, whichever caller checked it out, instead of going back to
  // the pool to fail the next request the same way.
  const broken = new WeakSet<pg.PoolClient>();
  pool.on('connect', (client) => {
    client.on('error', () => {});
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as { query: unknown }).query = (...args: unknown[]) => {
      const r = query(...args);
      if (r instanceof Promise)
        r.catch((error: unknown) => {
          if (databaseFailureOf(error)?.code === 'database_unavailable') broken.add(client);
        });
      return r;
    };
  });
  pool.on('release', (_error: Error | undefined, client: pg.PoolClient) => {
    if (!broken.has(client)) return;
    broken.delete(client);
    void client.end().catch(() => {});
  });
  return pool;
}
