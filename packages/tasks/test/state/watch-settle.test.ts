import { listenSettled } from '../../../../test/support/settled-listener.ts';
import { pollUntil } from '../../../../test/support/poll.ts';
import {
  completeTask,
  requestCancel,
  watchSettle,
  type Lease,
} from '../../src/task-state/index.ts';
import { claimLease, insertTask, openStateDatabase, type StateDatabase } from './state-database.ts';

// watch-settle.ts and settle-task.ts: an ending notifies `mtg_task_settled` only when someone
// watches for it (every NOTIFY wakes every listening session of the database, the workers'
// too). A watch that commits while the settlement waits for the row is still seen.
let s: StateDatabase;
let settled: Awaited<ReturnType<typeof listenSettled>>;
beforeAll(async () => {
  s = await openStateDatabase();
  settled = await listenSettled(s.db.url);
});
afterAll(async () => {
  await settled?.close();
  await s?.close();
});

const complete = (taskId: string, lease: Lease) =>
  completeTask(
    { pool: s.worker },
    {
      taskId,
      lease,
      workerId: lease.owner,
      finished: {
        result: { content: [] },
        text: '{"content":[]}',
        sizeBytes: 14,
        deleteOnRead: false,
      },
      runMs: 1,
      downstreamSystems: [],
    },
  );

/** Until `n` sessions of the test database wait for a lock. */
const lockWaiters = (n: number) =>
  pollUntil(
    async () =>
      (
        await s.admin.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        )
      ).rows[0]!.n,
    (waiting) => waiting >= n,
    10_000,
    10,
  );

test('an ending nobody watches notifies nobody; a watched one notifies', async () => {
  const unwatched = await insertTask(s.admin);
  const watched = await insertTask(s.admin);
  expect(await watchSettle(s.gateway, watched)).toBe(true);
  await complete(unwatched, await claimLease(s, unwatched, 'w1'));
  await complete(watched, await claimLease(s, watched, 'w1'));
  const notified = await settled.soFar();
  expect(notified).toContain(watched);
  expect(notified).not.toContain(unwatched);
});

test('a watch after the ending says so and writes nothing', async () => {
  const id = await insertTask(s.admin);
  await complete(id, await claimLease(s, id, 'w1'));
  expect(await watchSettle(s.gateway, id)).toBe(false);
  const row = await s.admin.query('SELECT settle_watched FROM app.tasks WHERE id = $1', [id]);
  expect(row.rows[0]).toEqual({ settle_watched: false });
});

test('a cancel request watches the ending it waits for', async () => {
  const id = await insertTask(s.admin);
  const lease = await claimLease(s, id, 'w1');
  await requestCancel(
    s.gateway,
    id,
    { path: 'owner', subject: 'alice', reason: 'stop' },
    {
      type: 'task.cancel_requested',
      taskId: id,
      tenant: 'acme',
      subject: 'alice',
      client: 'agent',
      tool: 'slow_tool',
    },
  );
  await complete(id, lease);
  expect(await settled.soFar()).toContain(id);
});

test("a watch committed after the settlement's snapshot, while it waits for the row, is seen", async () => {
  const id = await insertTask(s.admin);
  const lease = await claimLease(s, id, 'w1');
  // Someone holds the row: the watch queues for it first, then the settlement (its snapshot
  // taken now, before the watch commits).
  const holder = await s.admin.connect();
  try {
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM app.tasks WHERE id = $1 FOR NO KEY UPDATE', [id]);
    const watch = watchSettle(s.gateway, id);
    await lockWaiters(1);
    const settle = complete(id, lease);
    await lockWaiters(2);
    await holder.query('COMMIT');
    expect(await watch).toBe(true);
    expect(await settle).toMatchObject({ status: 'completed' });
  } finally {
    holder.release();
  }
  expect(await settled.soFar()).toContain(id);
});
