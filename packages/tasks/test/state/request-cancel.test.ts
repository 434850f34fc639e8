import { flagPrincipalTasks, requestCancel } from '../../src/task-state/index.ts';
import { insertTask, openStateDatabase, taskRow, type StateDatabase } from './state-database.ts';

// request-cancel.ts: a cancel request flags an active task once (the first request's who
// and why stand) and never touches an ended one; a revocation flags every active task of
// its principal and only those.
let s: StateDatabase;
beforeAll(async () => {
  s = await openStateDatabase();
});
afterAll(async () => {
  await s?.close();
});

const event = (taskId: string) => ({
  type: 'task.cancel_requested' as const,
  taskId,
  tenant: 'acme',
  subject: 'alice',
  client: 'agent',
  tool: 'slow_tool',
});

test('the first request stands; an ended task is not flagged', async () => {
  const id = await insertTask(s.admin);
  await requestCancel(
    s.gateway,
    id,
    { path: 'owner', subject: 'alice', reason: 'first' },
    event(id),
  );
  await requestCancel(
    s.gateway,
    id,
    { path: 'admin', subject: 'root', reason: 'second' },
    event(id),
  );
  expect((await taskRow(s.admin, id))!.cancel_requested_by).toMatchObject({ reason: 'first' });

  const ended = await insertTask(s.admin);
  await s.admin.query(`UPDATE app.tasks SET status = 'failed', ended_at = now() WHERE id = $1`, [
    ended,
  ]);
  await requestCancel(s.gateway, ended, { path: 'owner', reason: 'late' }, event(ended));
  expect((await taskRow(s.admin, ended))!.cancel_requested_by).toBeNull();
});

test("a revocation flags its principal's active tasks, and only those", async () => {
  const mine = await insertTask(s.admin, { subject: 'carol' });
  const theirs = await insertTask(s.admin, { subject: 'dave' });
  const done = await insertTask(s.admin, { subject: 'carol' });
  await s.admin.query(`UPDATE app.tasks SET status = 'failed', ended_at = now() WHERE id = $1`, [
    done,
  ]);
  const flagged = await flagPrincipalTasks(
    s.gateway,
    { tenant: 'acme', subject: 'carol' },
    { path: 'revocation', reason: 'revoked' },
  );
  expect(flagged).toEqual([mine]);
  expect((await taskRow(s.admin, theirs))!.cancel_requested_by).toBeNull();
});

test("a cancel while a step is journaled: neither waits for the other's lock in a cycle", async () => {
  const id = await insertTask(s.admin);
  // The tenant's chain exists (a first append creates it).
  await requestCancel(
    s.gateway,
    await insertTask(s.admin),
    { path: 'owner', reason: 'x' },
    event(id),
  );
  // A step's journal statement, taken apart: the chain lock first (its audit append), then
  // the journal row, whose foreign key locks the task row KEY SHARE at the statement's end.
  const step = await s.admin.connect();
  try {
    await step.query('BEGIN');
    await step.query(`SELECT 1 FROM audit.chains WHERE tenant = 'acme' FOR UPDATE`);
    // The cancel takes the task row, then waits for the chain lock the step holds.
    const cancel = requestCancel(s.gateway, id, { path: 'owner', reason: 'stop' }, event(id));
    for (let i = 0; i < 100; i++) {
      const w = await s.admin.query(
        `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%audit.append%'`,
      );
      if (w.rowCount) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    // With the cancel holding the row FOR UPDATE this insert would wait on it: a deadlock,
    // and one of the two refused (40P01) a second later.
    await step.query(
      `INSERT INTO app.task_steps (task_id, step, seq, output, lease_epoch, worker, started_at)
       VALUES ($1, 'fetch', 1, '{}', 0, 'w1', now())`,
      [id],
    );
    await step.query('COMMIT');
    await cancel;
  } finally {
    step.release();
  }
  expect((await taskRow(s.admin, id))!.cancel_requested_by).toMatchObject({ reason: 'stop' });
});
