import pg from 'pg';

export type Pool = pg.Pool;
export interface PoolOptions {
  connectionString: string;
  /** Role to SET on each new connection; omit to keep the connecting user. */
  role?: string;
  max?: number;
  applicationName?: string;
}

// int8 (bigint) as a JS number is safe for our sequences (< 2^53); counts come back as numbers.
pg.types.setTypeParser(20, (v) => Number(v));

export function createPool(options: PoolOptions): Pool {
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.max ?? 10,
    application_name: options.applicationName,
    // Fail fast instead of hanging on a dead database; callers retry.
    connectionTimeoutMillis: 5000,
    // The role is a startup parameter, so every session is under it before its first query.
    ...(options.role ? { options: `-c role=${options.role}` } : {}),
  });
  // A client losing its connection (database restart) must not crash the process: the
  // pool's listener covers idle clients only, so give every client its own. The query in
  // flight still rejects, and callers retry.
  pool.on('error', () => {});
  pool.on('connect', (client) => {
    client.on('error', () => {});
  });
  return pool;
}
