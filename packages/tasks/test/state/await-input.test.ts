import { claimTask, markInputRequired, type Lease } from '../../src/task-state/index.ts';
import type { TaskRow } from '../../src/task-row.ts';
import {
  eventTypes,
  expireLease,
  insertTask,
  openStateDatabase,
  taskRow,
  type StateDatabase,
} from './state-database.ts';

// await-input.ts: working ⇄ input_required under the lease the run still holds; a stale epoch
// moves nothing, and a repeat of the current status writes no second event.
let s: StateDatabase;
beforeAll(async () => {
  s = await openStateDatabase();
});
afterAll(async () => {
  await s?.close();
});

async function claimed(taskId: string, workerId: string) {
  const c = await claimTask(s.worker, { taskId, workerId, leaseMs: 60_000 });
  if (c.kind !== 'claimed') throw new Error(`not claimed: ${c.kind}`);
  return c;
}

const mark = (task: TaskRow, lease: Lease, message: string | null) =>
  markInputRequired(s.worker, {
    task,
    lease,
    workerId: lease.owner,
    message,
    downstream: 'upstream:demo',
  });

test('the holder moves to input_required and back, one event each; a repeat only refreshes', async () => {
  const id = await insertTask(s.admin);
  const { task, lease } = await claimed(id, 'w1');
  expect(await mark(task, lease, 'Which account?')).toBe(true);
  expect(await taskRow(s.admin, id)).toMatchObject({ status: 'input_required', lease_owner: 'w1' });
  expect(await mark(task, lease, 'Which account, again?')).toBe(true);
  expect(await mark(task, lease, null)).toBe(true);
  expect(await taskRow(s.admin, id)).toMatchObject({ status: 'working' });
  expect(await eventTypes(s.admin, id)).toEqual([
    'task.started',
    'task.input_required',
    'task.input_resolved',
  ]);
});

test('a stale epoch moves nothing and writes nothing', async () => {
  const id = await insertTask(s.admin);
  const first = await claimed(id, 'w1');
  await expireLease(s.admin, id);
  await claimed(id, 'w1');
  expect(await mark(first.task, first.lease, 'Which account?')).toBe(false);
  expect(await taskRow(s.admin, id)).toMatchObject({ status: 'working' });
  expect(await eventTypes(s.admin, id)).toEqual(['task.started', 'task.lease_taken']);
});
