import { purgeExpired } from '../../src/task-state/index.ts';
import { insertTask, openStateDatabase, taskRow, type StateDatabase } from './state-database.ts';

// purge-tasks.ts: retention deletes an ended task once its ttl has passed (its steps go with
// it) and an expired result; an active task or one still retained stays.
let s: StateDatabase;
beforeAll(async () => {
  s = await openStateDatabase();
});
afterAll(async () => {
  await s?.close();
});

const end = (id: string, agoMs: number) =>
  s.admin.query(
    `UPDATE app.tasks SET status = 'completed', outcome = 'completed',
            ended_at = now() - $2 * interval '1 millisecond' WHERE id = $1`,
    [id, agoMs],
  );

test('ended past its ttl: purged with its steps and one task.purged event; the rest stay', async () => {
  const old = await insertTask(s.admin, { ttlMs: 60_000 });
  const retained = await insertTask(s.admin, { ttlMs: 60_000 });
  const active = await insertTask(s.admin, { ttlMs: 1 });
  await s.admin.query(
    `INSERT INTO app.task_steps (task_id, step, seq, output, lease_epoch, worker, started_at)
     VALUES ($1, 'fetch', 1, '{}', 1, 'w1', now())`,
    [old],
  );
  await end(old, 61_000);
  await end(retained, 59_000);
  await s.admin.query(`UPDATE app.tasks SET created_at = now() - interval '1 day' WHERE id = $1`, [
    active,
  ]);
  await purgeExpired(s.worker);
  expect(await taskRow(s.admin, old)).toBeUndefined();
  expect(
    (await s.admin.query(`SELECT 1 FROM app.task_steps WHERE task_id = $1`, [old])).rowCount,
  ).toBe(0);
  expect(await taskRow(s.admin, retained)).toMatchObject({ status: 'completed' });
  expect(await taskRow(s.admin, active)).toMatchObject({ status: 'working' });
  const purged = await s.admin.query(
    `SELECT body FROM audit.events WHERE type = 'task.purged' ORDER BY seq DESC LIMIT 1`,
  );
  expect(JSON.parse(purged.rows[0].body).data).toMatchObject({ tasks: 1, taskIds: [old] });
});

test('an expired result is deleted, a live one kept; nothing to purge writes no event', async () => {
  const a = await insertTask(s.admin);
  const b = await insertTask(s.admin);
  for (const [id, offset] of [
    [a, '-1 second'],
    [b, '1 hour'],
  ] as const) {
    await s.admin.query(
      `INSERT INTO app.task_results (task_id, result, is_error, size_bytes, expires_at, delete_on_read)
       VALUES ($1, '{}', false, 2, now() + $2::interval, false)`,
      [id, offset],
    );
  }
  await purgeExpired(s.worker);
  const left = await s.admin.query(
    `SELECT task_id FROM app.task_results WHERE task_id = ANY ($1)`,
    [[a, b]],
  );
  expect(left.rows.map((r: { task_id: string }) => r.task_id)).toEqual([b]);
  const count = async () =>
    (await s.admin.query(`SELECT count(*)::int AS n FROM audit.events WHERE type = 'task.purged'`))
      .rows[0].n as number;
  const before = await count();
  await purgeExpired(s.worker);
  expect(await count()).toBe(before);
});
