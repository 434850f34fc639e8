import {
  cancelTaskNow,
  completeTask,
  failTask,
  type CompletedStep,
  type Lease,
} from '../../src/task-state/index.ts';
import { canonicalJson } from '@mtg/audit';
import { jobCompletion, type JobCompletion } from '../../src/job-queue.ts';
import {
  eventTypes,
  expireLease,
  insertTask,
  openStateDatabase,
  QUEUE,
  taskRow,
  type StateDatabase,
  claimLease,
  OWNER,
  stepEvent,
} from './state-database.ts';

// settle-task.ts (through end-task.ts, its only caller): an active task ends exactly once;
// a leased settlement matches only the current epoch; one from outside the lease bumps it.
let s: StateDatabase;
beforeAll(async () => {
  s = await openStateDatabase();
});
afterAll(async () => {
  await s?.close();
});

const finished = (text: string) => ({
  result: { content: [{ type: 'text', text }] },
  text: JSON.stringify({ content: [{ type: 'text', text }] }),
  sizeBytes: text.length,
  deleteOnRead: false,
});

const complete = (
  taskId: string,
  lease: Lease,
  text: string,
  job?: JobCompletion,
  step?: CompletedStep,
  atBoundary?: boolean,
) =>
  completeTask(
    { pool: s.worker },
    {
      taskId,
      lease,
      workerId: lease.owner,
      finished: finished(text),
      runMs: 1,
      downstreamSystems: [],
      ...(job ? { job } : {}),
      ...(step ? { step } : {}),
      ...(atBoundary ? { atBoundary } : {}),
    },
  );

/** A run's last step, not journaled yet, as the runner hands it to the completion. */
const lastStep = (taskId: string, name: string, output: unknown): CompletedStep => ({
  name,
  seq: 2,
  output,
  startedAt: new Date('2026-01-01T00:00:00Z'),
  event: stepEvent(taskId, name),
});

async function results(taskId: string) {
  const r = await s.admin.query(`SELECT result FROM app.task_results WHERE task_id = $1`, [taskId]);
  return r.rows.map((row: { result: string }) => row.result);
}

test("a stale epoch's settlement is refused: no result stored, no event, still active", async () => {
  const id = await insertTask(s.admin);
  const stale = await claimLease(s, id, 'w1');
  await expireLease(s.admin, id);
  // The same worker id at the next epoch (a restarted worker keeps its id): only the
  // epoch tells the stale holder apart.
  const current = await claimLease(s, id, 'w1');
  expect(await complete(id, stale, 'stale result')).toBeUndefined();
  expect(
    await failTask(
      { pool: s.worker },
      { taskId: id, lease: stale, workerId: 'w1', outcome: 'error', message: 'x' },
    ),
  ).toBeUndefined();
  expect(await taskRow(s.admin, id)).toMatchObject({ status: 'working', lease_epoch: 2 });
  expect(await results(id)).toEqual([]);
  const done = await complete(id, current, 'the result');
  expect(done).toMatchObject({ id, status: 'completed' });
  expect(await results(id)).toHaveLength(1);
  expect(await eventTypes(s.admin, id)).toEqual([
    'task.started',
    'task.lease_taken',
    'task.completed',
  ]);
});

test('two concurrent settlements: exactly one wins, one ending event, one result', async () => {
  for (let round = 0; round < 5; round++) {
    const id = await insertTask(s.admin);
    const lease = await claimLease(s, id, 'w1');
    const ended = await Promise.all([
      complete(id, lease, 'done'),
      failTask(
        { pool: s.worker },
        { taskId: id, lease, workerId: 'w1', outcome: 'error', message: 'x' },
      ),
      cancelTaskNow(
        { pool: s.gateway },
        {
          taskId: id,
          by: { path: 'owner', subject: 'alice' },
          message: 'Cancelled',
          settledBy: 'gateway',
        },
      ),
    ]);
    expect(ended.filter((row) => row !== undefined)).toHaveLength(1);
    const endings = (await eventTypes(s.admin, id)).filter((t) =>
      ['task.completed', 'task.failed', 'task.cancelled'].includes(t),
    );
    expect(endings).toHaveLength(1);
    const row = (await taskRow(s.admin, id))!;
    expect(row.status).toBe(ended.find((r) => r !== undefined)!.status);
    // A result row exists exactly when the completion won (it is stored only with the settlement).
    expect(await results(id)).toHaveLength(row.status === 'completed' ? 1 : 0);
  }
});

test('a settlement from outside the lease bumps the epoch, fencing the worker off', async () => {
  const id = await insertTask(s.admin);
  const lease = await claimLease(s, id, 'w1');
  const cancelled = await cancelTaskNow(
    { pool: s.gateway },
    {
      taskId: id,
      by: { path: 'admin', subject: 'root' },
      message: 'Cancelled',
      settledBy: 'admin',
    },
  );
  expect(cancelled).toMatchObject({ status: 'cancelled' });
  expect(await taskRow(s.admin, id)).toMatchObject({
    lease_owner: null,
    lease_epoch: lease.epoch + 1,
  });
  expect(await complete(id, lease, 'too late')).toBeUndefined();
  expect(await results(id)).toEqual([]);
});

test('onlyUnleased does not cancel a task a live worker holds', async () => {
  const id = await insertTask(s.admin);
  await claimLease(s, id, 'w1');
  const by = { path: 'revocation', reason: 'revoked' };
  const args = {
    taskId: id,
    by,
    message: 'Cancelled',
    settledBy: 'no_live_worker',
    onlyUnleased: true,
  };
  expect(await cancelTaskNow({ pool: s.gateway }, args)).toBeUndefined();
  await expireLease(s.admin, id);
  expect(await cancelTaskNow({ pool: s.gateway }, args)).toMatchObject({ outcome: 'revoked' });
});

test("the completion's event tells what its statement did: the row's owner, duration and attempts", async () => {
  const id = await insertTask(s.admin, { subject: 'he said "hi"\\ \n\u0001 é 😀' });
  const lease = await claimLease(s, id, 'w1');
  await expireLease(s.admin, id);
  const current = await claimLease(s, id, 'w2');
  const row = await complete(id, current, 'the result');
  expect(row).toMatchObject({ status: 'completed', attempts: 2 });
  expect(lease.epoch).toBe(1);
  const { rows } = await s.admin.query<{ body: string }>(
    `SELECT body FROM audit.events WHERE task_id = $1 AND type = 'task.completed'`,
    [id],
  );
  // As the event would read written whole in JavaScript from the settled row.
  expect(rows.map((r) => r.body)).toEqual([
    canonicalJson({
      taskId: id,
      tenant: row!.tenant,
      subject: row!.subject,
      client: row!.client,
      tool: row!.tool,
      correlationId: row!.correlation_id,
      reason: 'success',
      data: {
        outcome: 'success',
        durationMs: row!.ended_at!.getTime() - row!.created_at.getTime(),
        runMs: 1,
        resultBytes: 'the result'.length,
        downstreamSystems: [],
        attempts: 2,
      },
    }),
  ]);
});

test("a completion with its run's job completes the job in its own statement, only when the task settles", async () => {
  const id = await insertTask(s.admin);
  const stale = await claimLease(s, id, 'w1');
  await expireLease(s.admin, id);
  const current = await claimLease(s, id, 'w1');
  await s.queue.boss.send(QUEUE, { taskId: id });
  const [job] = await s.queue.boss.fetch(QUEUE);
  const jobState = async () =>
    (
      await s.admin.query(
        `SELECT j.state, j.completed_on = t.ended_at AS with_the_ending
           FROM pgboss.job j, app.tasks t WHERE j.id = $1 AND t.id = $2`,
        [job!.id, id],
      )
    ).rows[0];
  // A stale holder's completion settles nothing, and so completes no job.
  expect(
    await complete(id, stale, 'stale', await jobCompletion(s.queue.boss, job!)),
  ).toBeUndefined();
  expect(await jobState()).toMatchObject({ state: 'active' });
  // The current holder's completes both, at the same instant (one transaction).
  const done = await complete(id, current, 'the result', await jobCompletion(s.queue.boss, job!));
  expect(done).toMatchObject({ status: 'completed' });
  expect(await jobState()).toEqual({ state: 'completed', with_the_ending: true });
});

test("a job fetched again since is not completed by the earlier attempt's completion", async () => {
  const id = await insertTask(s.admin);
  const lease = await claimLease(s, id, 'w1');
  await s.queue.boss.send(QUEUE, { taskId: id }, { retryLimit: 2, retryDelay: 0 });
  const [first] = await s.queue.boss.fetch(QUEUE);
  await s.queue.boss.fail(QUEUE, first!.id);
  const [again] = await s.queue.boss.fetch(QUEUE);
  expect(again).toMatchObject({ id: first!.id, retryCount: 1 });
  // pg-boss's fence to the attempt holds inside the statement: the task ends, the job stays.
  expect(
    await complete(id, lease, 'done', await jobCompletion(s.queue.boss, first!)),
  ).toMatchObject({
    status: 'completed',
  });
  const { rows } = await s.admin.query(`SELECT state FROM pgboss.job WHERE id = $1`, [first!.id]);
  expect(rows).toEqual([{ state: 'active' }]);
});

test("a completion with the run's last step journals it and its event first, in the same statement, only when the task settles", async () => {
  const id = await insertTask(s.admin);
  const stale = await claimLease(s, id, 'w1');
  await expireLease(s.admin, id);
  const current = await claimLease(s, id, 'w2');
  await s.queue.boss.send(QUEUE, { taskId: id });
  const [job] = await s.queue.boss.fetch(QUEUE);
  const steps = async () =>
    (
      await s.admin.query(
        `SELECT s.step, s.seq, s.output, s.lease_epoch, s.worker, s.xmin = t.xmin AS with_the_ending
           FROM app.task_steps s JOIN app.tasks t ON t.id = s.task_id WHERE s.task_id = $1`,
        [id],
      )
    ).rows;
  // A stale holder's completion journals nothing and appends no step event.
  expect(
    await complete(id, stale, 'stale', undefined, lastStep(id, 'batch:1', { n: 1 })),
  ).toBeUndefined();
  expect(await steps()).toEqual([]);
  // The current holder's: the step under its lease, in the ending's transaction, with the
  // job's completion after the step's parameters.
  const done = await complete(
    id,
    current,
    'the result',
    await jobCompletion(s.queue.boss, job!),
    lastStep(id, 'batch:1', { n: 2 }),
  );
  expect(done).toMatchObject({ status: 'completed' });
  expect(await steps()).toEqual([
    {
      step: 'batch:1',
      seq: 2,
      output: { value: { n: 2 } },
      lease_epoch: 2,
      worker: 'w2',
      with_the_ending: true,
    },
  ]);
  const { rows } = await s.admin.query(`SELECT state FROM pgboss.job WHERE id = $1`, [job!.id]);
  expect(rows).toEqual([{ state: 'completed' }]);
  expect((await eventTypes(s.admin, id)).slice(-2)).toEqual([
    'task.step_completed',
    'task.completed',
  ]);
});

test('a completion whose last step was journaled already appends no second step event', async () => {
  const id = await insertTask(s.admin);
  const lease = await claimLease(s, id, 'w1');
  await s.admin.query(
    `INSERT INTO app.task_steps (task_id, step, seq, output, lease_epoch, worker, started_at)
     VALUES ($1, 'batch:1', 2, '{"value":1}', 1, 'w1', now())`,
    [id],
  );
  expect(
    await complete(id, lease, 'the result', undefined, lastStep(id, 'batch:1', 2)),
  ).toMatchObject({ status: 'completed' });
  expect(await eventTypes(s.admin, id)).toEqual(['task.started', 'task.completed']);
  const { rows } = await s.admin.query(`SELECT output FROM app.task_steps WHERE task_id = $1`, [
    id,
  ]);
  expect(rows).toEqual([{ output: { value: 1 } }]);
});

test('a completion at the run’s end settles only if no stop stands: a cancel, the deadline, a revocation leave everything as it was', async () => {
  const stops: Record<string, (id: string) => Promise<unknown>> = {
    'a cancel requested': (id) =>
      s.admin.query(
        `UPDATE app.tasks SET cancel_requested_at = now(),
                cancel_requested_by = '{"path":"owner"}' WHERE id = $1`,
        [id],
      ),
    'the deadline passed': (id) =>
      s.admin.query(`UPDATE app.tasks SET deadline = now() - interval '1 second' WHERE id = $1`, [
        id,
      ]),
    'the owner revoked': () =>
      s.admin.query(
        `INSERT INTO app.principals (tenant, subject, revoked, revoked_at)
         VALUES ($1, 'revoked-owner', true, now())
         ON CONFLICT (tenant, subject) DO UPDATE SET revoked = true`,
        [OWNER.tenant],
      ),
  };
  for (const [stop, make] of Object.entries(stops)) {
    const id = await insertTask(s.admin, { subject: 'revoked-owner' });
    const lease = await claimLease(s, id, 'w1');
    await make(id);
    const step = lastStep(id, 'batch:1', 1);
    expect({ stop, ended: await complete(id, lease, 'r', undefined, step, true) }).toEqual({
      stop,
      ended: undefined,
    });
    expect({ stop, row: await taskRow(s.admin, id) }).toMatchObject({
      stop,
      row: { status: 'working', lease_owner: 'w1' },
    });
    expect(await results(id)).toEqual([]);
    expect(await eventTypes(s.admin, id)).toEqual(['task.started']);
    const journal = await s.admin.query(`SELECT 1 FROM app.task_steps WHERE task_id = $1`, [id]);
    expect(journal.rows).toEqual([]);
    if (stop === 'the owner revoked')
      await s.admin.query(
        `UPDATE app.principals SET revoked = false WHERE tenant = $1 AND subject = 'revoked-owner'`,
        [OWNER.tenant],
      );
  }
  // With none of them it settles, as a completion does.
  const id = await insertTask(s.admin, { subject: 'revoked-owner' });
  const lease = await claimLease(s, id, 'w1');
  expect(await complete(id, lease, 'r', undefined, undefined, true)).toMatchObject({
    status: 'completed',
  });
});
