import type { TaskRow } from '../../src/task-row.ts';
import { resumeIfPaused } from '../../src/task-state/index.ts';
import {
  eventTypes,
  insertTask,
  openStateDatabase,
  principal,
  type StateDatabase,
} from './state-database.ts';

// resume-task.ts: a task paused for a live user resumes once when its owner comes back with a
// token: working again, one more stage granted, a new job queued, one task.resumed event; a
// task that is not paused, held by a worker, past its deadline or asked without a token is
// left as it is.
let s: StateDatabase;
beforeAll(async () => {
  s = await openStateDatabase();
});
afterAll(async () => {
  await s?.close();
});

const ctx = { principal: principal('alice'), correlationId: 'c', wire: 'test', token: 'live' };

/** A task as pauseTask leaves it: input_required, waiting for its owner, nobody holding it. */
async function paused(set = '', live = true): Promise<TaskRow> {
  const id = await insertTask(s.admin);
  const r = await s.admin.query<TaskRow>(
    `UPDATE app.tasks SET status = 'input_required', needs_live_user = ${live},
            status_message = 'waiting for the owner' ${set} WHERE id = $1 RETURNING *`,
    [id],
  );
  return r.rows[0]!;
}

const jobs = async (id: string) =>
  (await s.admin.query(`SELECT id FROM pgboss.job WHERE data->>'taskId' = $1`, [id])).rows.length;

test('the owner back with a live token resumes a paused task once, however many ask at once', async () => {
  const row = await paused();
  const deps = { pool: s.gateway, queue: s.queue };
  const results = await Promise.all(
    Array.from({ length: 4 }, () => resumeIfPaused(deps, row, 'slow:run', ctx)),
  );
  expect(results.filter((r) => r.status === 'working')).toHaveLength(1);
  const now = (await s.admin.query<TaskRow>(`SELECT * FROM app.tasks WHERE id = $1`, [row.id]))
    .rows[0]!;
  expect(now).toMatchObject({
    status: 'working',
    stage_grants: row.stage_grants + 1,
    status_message: 'Resumed by the owner',
  });
  expect(now.job_id).not.toBe(row.job_id);
  expect(await jobs(row.id)).toBe(1);
  expect((await eventTypes(s.admin, row.id)).filter((t) => t === 'task.resumed')).toHaveLength(1);
});

test.each([
  ['no live token', '', { token: undefined }],
  ['a downstream waits (not paused for the owner)', 'downstream', {}],
  [
    'a worker still holds it',
    ", lease_owner = 'w1', lease_expires_at = now() + interval '1 minute'",
    {},
  ],
  ['past its deadline', ", deadline = now() - interval '1 second'", {}],
])('left as it is: %s', async (_name, set, override) => {
  const row = set === 'downstream' ? await paused('', false) : await paused(set);
  const out = await resumeIfPaused({ pool: s.gateway, queue: s.queue }, row, 'slow:run', {
    ...ctx,
    ...override,
  });
  expect(out).toBe(row);
  const now = (await s.admin.query<TaskRow>(`SELECT * FROM app.tasks WHERE id = $1`, [row.id]))
    .rows[0]!;
  expect({ status: now.status, stage_grants: now.stage_grants }).toEqual({
    status: 'input_required',
    stage_grants: row.stage_grants,
  });
  expect(await jobs(row.id)).toBe(0);
  expect(await eventTypes(s.admin, row.id)).not.toContain('task.resumed');
});
