import { ROLES } from '@mtg/db';
import { installQueue, UNCLAIMED_QUEUES } from '../../src/job-queue.ts';
import { maintenanceSweep } from '../../src/maintenance-sweep.ts';
import { openStateDatabase, QUEUE, type StateDatabase } from './state-database.ts';

// The maintenance leader's re-announcement probe (UNCLAIMED_QUEUES, in maintenanceSweep):
// which queues it names, and that it finds them through pg-boss's index whatever the
// statistics say, so a backlog costs each tick one job's read, not the whole table's.
const FRESH = 'unclaimed-fresh';
const RETRY = 'unclaimed-retry';
const UNSERVED = 'unclaimed-unserved';
const BACKLOG = 'unclaimed-backlog';

let s: StateDatabase;
beforeAll(async () => {
  s = await openStateDatabase();
  await installQueue(s.db.url, [ROLES.gateway, ROLES.worker], [FRESH, RETRY, UNSERVED, BACKLOG]);
  await s.admin.query(
    `INSERT INTO app.workers (id, queues, registry_fingerprint) VALUES
       ('live', $1, 'f'),
       ('gone', $2, 'f')`,
    [
      [QUEUE, FRESH, RETRY],
      [UNSERVED, BACKLOG],
    ],
  );
  // Only `live` counts: `gone` was last seen a minute ago. `live` is seen an hour ahead, so
  // that however slowly the tests run it stays within the 15 s a live worker has.
  await s.admin.query(
    `UPDATE app.workers SET seen_at = now() - interval '1 minute' WHERE id = 'gone'`,
  );
  await s.admin.query(
    `UPDATE app.workers SET seen_at = now() + interval '1 hour' WHERE id = 'live'`,
  );
});
afterAll(async () => {
  await s?.close();
});

const job = (name: string, columns: string) =>
  s.admin.query(`INSERT INTO pgboss.job (name, state, created_on, start_after, blocked)
                 VALUES ('${name}', ${columns})`);

test('it names the served queues holding a job created over a second ago or a retry come due, and no other', async () => {
  // QUEUE: a created job two seconds old (its notification was missed).
  await job(QUEUE, `'created', now() - interval '2 seconds', now() - interval '2 seconds', false`);
  // FRESH: a job created just now, a deferred one, a blocked one, an active one, a completed one.
  // "Just now" is written a minute ahead, so that a slow machine cannot age it past the
  // second between this insert and the sweep.
  await job(FRESH, `'created', now() + interval '1 minute', now(), false`);
  await job(FRESH, `'created', now() - interval '1 minute', now() + interval '1 hour', false`);
  await job(FRESH, `'created', now() - interval '1 minute', now() - interval '1 minute', true`);
  await job(FRESH, `'active', now() - interval '1 minute', now() - interval '1 minute', false`);
  await job(FRESH, `'completed', now() - interval '1 minute', now() - interval '1 minute', false`);
  // RETRY: a retry due now, though created just now.
  await job(RETRY, `'retry', now(), now() - interval '1 millisecond', false`);
  // UNSERVED: waiting work, but its only worker is gone.
  await job(UNSERVED, `'created', now() - interval '1 minute', now() - interval '1 minute', false`);

  const { unclaimed } = await maintenanceSweep(s.worker);
  expect([...unclaimed].sort()).toEqual([QUEUE, RETRY].sort());
});

test('with a backlog of queued jobs in another queue, a pooled session still reads one job per probe', async () => {
  await s.admin.query(`DELETE FROM pgboss.job`);
  await s.admin.query(
    `INSERT INTO pgboss.job (name, created_on, start_after)
       SELECT '${BACKLOG}', now() - interval '1 minute', now() - interval '1 minute'
         FROM generate_series(1, 20000)`,
  );
  await job(RETRY, `'retry', now(), now() - interval '1 millisecond', false`);
  // Statistics that say nearly every job is queued: what a backlog leaves.
  await s.admin.query('ANALYZE pgboss.job');
  const session = await s.worker.connect();
  try {
    // A pooled session's plan: built once, from these statistics (plan_cache_mode as the
    // product's pools set it).
    await session.query('SET plan_cache_mode = force_generic_plan');
    await session.query(`PREPARE probe(int) AS ${UNCLAIMED_QUEUES}`);
    const explained = await session.query<{ 'QUERY PLAN': unknown }>(
      'EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE probe(15000)',
    );
    const [{ pages }] = (
      await s.admin.query<{ pages: number }>(
        `SELECT pg_relation_size('pgboss.job_common') / 8192 AS pages`,
      )
    ).rows as [{ pages: number }];
    const top = (explained.rows[0]!['QUERY PLAN'] as Array<{ Plan: Record<string, number> }>)[0]!
      .Plan;
    const buffers = top['Shared Hit Blocks']! + top['Shared Read Blocks']!;
    // The table is a few hundred pages; three probes of an index read a few pages each.
    expect(pages).toBeGreaterThan(200);
    expect(buffers).toBeLessThan(60);
    const named = await session.query<{ name: string }>('EXECUTE probe(15000)');
    expect(named.rows.map((r) => r.name)).toEqual([RETRY]);
  } finally {
    session.release();
  }
});
