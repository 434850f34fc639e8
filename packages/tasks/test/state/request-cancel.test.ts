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
