import type pg from 'pg';
import type { Pool } from './create-pool.ts';
import { createReadRouter, type ReadRouterOptions } from './read-router.ts';

/**
 * A pool for a process that only reads (the console, as mtg_auditor): each `query` and each
 * `connect` goes to the replica while the read router finds it fit (reachable, within the lag
 * bound), else to the primary; a replica that fails a query or a connection has it answered by
 * the primary instead. Everything else (`end`, the counts the metrics read) is the primary's,
 * and `end` ends both pools. Never for SQL that writes.
 */
export function createReadPreferringPool(options: ReadRouterOptions & { replica: Pool }): Pool {
  const router = createReadRouter(options);
  const { primary, replica } = options;
  const query = (...args: unknown[]) =>
    router
      .read([], (db) => (db.query as (...a: unknown[]) => Promise<pg.QueryResult>)(...args))
      .then((r) => r.value);
  const connect = () => router.read([], (db) => db.connect()).then((r) => r.value);
  const end = async () => {
    await router.close();
    await Promise.all([replica.end(), primary.end()]);
  };
  return new Proxy(primary, {
    get(target, property, receiver) {
      if (property === 'query') return query;
      if (property === 'connect') return connect;
      if (property === 'end') return end;
      return Reflect.get(target, property, receiver) as unknown;
    },
  });
}
