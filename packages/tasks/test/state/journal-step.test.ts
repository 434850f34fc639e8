import { journalStep, type Lease } from '../../src/task-state/index.ts';
import { pollUntil } from '../../../../test/support/poll.ts';
import {
  eventTypes,
  expireLease,
  insertTask,
  openStateDatabase,
  type StateDatabase,
  claimLease,
  stepEvent,
} from './state-database.ts';

// journal-step.ts: a step is recorded only under the lease the writer still holds (owner and
// epoch), once, with its audit event in the same statement.
let s: StateDatabase;
beforeAll(async () => {
  s = await openStateDatabase();
});
afterAll(async () => {
  await s?.close();
});

const journal = (taskId: string, lease: Lease, name: string, output: unknown) =>
  journalStep(s.worker, taskId, lease, { name, seq: 1, output, startedAt: new Date() }, () =>
    stepEvent(taskId, name),
  );

async function steps(taskId: string) {
  const r = await s.admin.query(
    `SELECT step, output, lease_epoch, worker FROM app.task_steps WHERE task_id = $1 ORDER BY step`,
    [taskId],
  );
  return r.rows;
}

test('the holder journals a step, with its event, and reads the boundary', async () => {
  const id = await insertTask(s.admin);
  const lease = await claimLease(s, id, 'w1');
  const b = await journal(id, lease, 'fetch', { rows: 3 });
  expect(b).toMatchObject({ mine: true, cancelRequested: false, revoked: false });
  expect(await steps(id)).toEqual([
    { step: 'fetch', output: { value: { rows: 3 } }, lease_epoch: 1, worker: 'w1' },
  ]);
  expect(await eventTypes(s.admin, id)).toEqual(['task.started', 'task.step_completed']);
});

test("a stale epoch's journal is refused: nothing recorded, no event, not mine", async () => {
  const id = await insertTask(s.admin);
  const stale = await claimLease(s, id, 'w1');
  await expireLease(s.admin, id);
  // The same worker id at the next epoch: only the epoch tells the stale holder apart.
  const current = await claimLease(s, id, 'w1');
  expect(current.epoch).toBe(stale.epoch + 1);
  expect(await journal(id, stale, 'fetch', 'from the old holder')).toMatchObject({ mine: false });
  // Another owner at the current epoch is no holder either.
  expect(
    await journal(id, { owner: 'w2', epoch: current.epoch }, 'fetch', 'wrong owner'),
  ).toMatchObject({ mine: false });
  expect(await steps(id)).toEqual([]);
  expect(await journal(id, current, 'fetch', 'from the holder')).toMatchObject({ mine: true });
  expect((await steps(id)).map((r) => r.output)).toEqual([{ value: 'from the holder' }]);
  expect(await eventTypes(s.admin, id)).toEqual([
    'task.started',
    'task.lease_taken',
    'task.step_completed',
  ]);
});

test('a journaled step is never overwritten, and a repeat writes no second event', async () => {
  const id = await insertTask(s.admin);
  const lease = await claimLease(s, id, 'w1');
  await journal(id, lease, 'fetch', 'first');
  expect(await journal(id, lease, 'fetch', 'second')).toMatchObject({ mine: false });
  expect((await steps(id)).map((r) => r.output)).toEqual([{ value: 'first' }]);
  expect(await eventTypes(s.admin, id)).toEqual(['task.started', 'task.step_completed']);
});

test('an ended task journals nothing', async () => {
  const id = await insertTask(s.admin);
  const lease = await claimLease(s, id, 'w1');
  await s.admin.query(`UPDATE app.tasks SET status = 'cancelled', ended_at = now() WHERE id = $1`, [
    id,
  ]);
  expect(await journal(id, lease, 'fetch', 'late')).toMatchObject({ mine: false });
  expect(await steps(id)).toEqual([]);
});

test("a step journaled with its progress while a cancel holds the task row: the step waits for the row before it takes the tenant's chain, so the two never deadlock", async () => {
  const id = await insertTask(s.admin);
  const lease = await claimLease(s, id, 'w1');
  // requestCancel's order, taken apart: the task row first, the tenant's chain lock last.
  const cancel = await s.admin.connect();
  try {
    await cancel.query('BEGIN');
    await cancel.query(`SELECT 1 FROM app.tasks WHERE id = $1 FOR NO KEY UPDATE`, [id]);
    const step = journalStep(
      s.worker,
      id,
      lease,
      { name: 'fetch', seq: 1, output: 1, startedAt: new Date() },
      () => ({
        type: 'task.step_completed',
        taskId: id,
        tenant: 'acme',
        subject: 'alice',
        client: 'agent',
        tool: 'slow_tool',
        data: { step: 'fetch' },
      }),
      { current: 1, total: 2, message: 'one of two' },
    );
    await pollUntil(
      async () =>
        (
          await s.admin.query(
            `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%task_steps%'`,
          )
        ).rowCount,
      (n) => n === 1,
      10_000,
      20,
    );
    // Were the step holding the chain (its append taken before its progress write), this
    // would wait on it while the step waits on the row: a deadlock, one of the two refused.
    await cancel.query(`SELECT 1 FROM audit.chains WHERE tenant = 'acme' FOR UPDATE`);
    await cancel.query('COMMIT');
    expect(await step).toMatchObject({ mine: true });
  } finally {
    cancel.release();
  }
  expect(await eventTypes(s.admin, id)).toEqual(['task.started', 'task.step_completed']);
  const row = await s.admin.query('SELECT progress, status_message FROM app.tasks WHERE id = $1', [
    id,
  ]);
  expect(row.rows[0]).toEqual({ progress: { current: 1, total: 2 }, status_message: 'one of two' });
});
