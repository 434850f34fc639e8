import { createBoss } from '../../src/job-queue.ts';
import { openStateDatabase, type StateDatabase } from './state-database.ts';

// pg-boss's instance registry samples the event loop on a 20 ms timer in every process that
// starts a PgBoss, idle or not, for a table nothing of the product reads: the product's PgBoss
// instances start without it, and so write no row there.
let s: StateDatabase;
beforeAll(async () => {
  s = await openStateDatabase();
});
afterAll(async () => {
  await s?.close();
});

test('a started job queue registers no pg-boss instance (and runs no event-loop sampler for it)', async () => {
  const boss = createBoss(s.worker, { supervise: false });
  boss.on('error', () => {});
  await boss.start();
  try {
    const { rows } = await s.admin.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pgboss.instance`,
    );
    // Three PgBoss instances have started on this database: the queue's installer, the
    // state database's (as the gateway's) and this one (as a worker's).
    expect(rows[0]!.n).toBe(0);
  } finally {
    await boss.stop({ graceful: false, close: false });
  }
});
