import { maintenanceSweep } from '../../src/maintenance-sweep.ts';
import { claimTask } from '../../src/task-state/index.ts';
import {
  expireLease,
  insertTask,
  openStateDatabase,
  taskRow,
  type StateDatabase,
} from './state-database.ts';

// The leader's tick in one statement: the reaper's write and the deadline sweep's read see
// the same snapshot, and each part answers what it did on its own.
let s: StateDatabase;
beforeAll(async () => {
  s = await openStateDatabase();
});
afterAll(async () => {
  await s?.close();
});

async function claim(taskId: string, workerId: string) {
  const c = await claimTask(s.worker, { taskId, workerId, leaseMs: 60_000 });
  if (c.kind !== 'claimed') throw new Error(`not claimed: ${c.kind}`);
}
const pastDeadline = (id: string) =>
  s.admin.query(`UPDATE app.tasks SET deadline = now() - interval '1 second' WHERE id = $1`, [id]);

test('one sweep reaps lapsed leases and reads late tasks: a late task whose lease it reaps is not live', async () => {
  const lapsed = await insertTask(s.admin);
  const lateLapsed = await insertTask(s.admin);
  const lateLive = await insertTask(s.admin);
  const onTime = await insertTask(s.admin);
  await claim(lapsed, 'dead-worker');
  await claim(lateLapsed, 'dead-worker');
  await claim(lateLive, 'live-worker');
  await claim(onTime, 'live-worker');
  await expireLease(s.admin, lapsed);
  await expireLease(s.admin, lateLapsed);
  await pastDeadline(lateLapsed);
  await pastDeadline(lateLive);

  const sweep = await maintenanceSweep(s.worker);

  const [job] = (
    await s.admin.query('SELECT job_id, job_queue FROM app.tasks WHERE id = $1', [lapsed])
  ).rows;
  expect(sweep.reaped).toEqual(
    expect.arrayContaining([{ id: lapsed, ...job }, expect.objectContaining({ id: lateLapsed })]),
  );
  expect(sweep.reaped.map((r) => r.id)).not.toContain(lateLive);
  expect(await taskRow(s.admin, lapsed)).toMatchObject({ lease_owner: null });
  expect(sweep.late).toEqual(
    expect.arrayContaining([
      { id: lateLapsed, live: false, waiting: null },
      { id: lateLive, live: true, waiting: null },
    ]),
  );
  expect(sweep.late.map((t) => t.id)).not.toContain(onTime);
  expect(sweep.late.map((t) => t.id)).not.toContain(lapsed);
  expect(Array.isArray(sweep.unclaimed)).toBe(true);

  // Nothing left to reap: the next sweep reaps none of them again.
  const again = await maintenanceSweep(s.worker);
  expect(again.reaped.map((r) => r.id)).not.toContain(lapsed);
});
