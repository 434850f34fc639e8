import type pg from 'pg';
import { databaseFailureOf } from './database-failure.ts';

/** Anything that runs SQL: a pool or a checked-out client inside a transaction. */
export interface Queryable {
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(
    text: string,
    values?: unknown[],
  ): Promise<pg.QueryResult<R>>;
}

export async function withTransaction<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    // A connection that failed (or went unanswered) is dropped, not given back to the pool:
    // the next request would wait on it in turn. The server rolls back a session it loses,
    // so there is no ROLLBACK to wait for on it.
    if (databaseFailureOf(error)?.code === 'database_unavailable') broken = error as Error;
    else await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    client.release(broken);
  }
}
