import { propagation } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { canonicalJson } from '@mtg/audit';
import { jobCompletion, jobFetch, UnbuiltStatement } from '../../src/job-queue.ts';
import { claimNextJob, claimTask } from '../../src/task-state/index.ts';
import {
  eventTypes,
  expireLease,
  insertSealedDelegation,
  insertTask,
  openStateDatabase,
  QUEUE,
  taskRow,
  type StateDatabase,
} from './state-database.ts';

// claim-task.ts: a lease is taken only when nobody holds a live one, and every claim bumps
// the epoch, so a takeover fences off the holder it replaced.
let s: StateDatabase;
beforeAll(async () => {
  s = await openStateDatabase();
});
afterAll(async () => {
  await s?.close();
});

test('a claim takes the lease at the next epoch and writes task.started', async () => {
  const id = await insertTask(s.admin);
  const c = await claimTask(s.worker, { taskId: id, workerId: 'w1', leaseMs: 60_000 });
  expect(c).toMatchObject({ kind: 'claimed', lease: { owner: 'w1', epoch: 1 }, firstStart: true });
  expect(await taskRow(s.admin, id)).toMatchObject({ lease_owner: 'w1', attempts: 1 });
  expect(await eventTypes(s.admin, id)).toEqual(['task.started']);
});

test('a live lease is not taken: a second claim is held, and nothing is written', async () => {
  const id = await insertTask(s.admin);
  await claimTask(s.worker, { taskId: id, workerId: 'w1', leaseMs: 60_000 });
  const second = await claimTask(s.worker, { taskId: id, workerId: 'w2', leaseMs: 60_000 });
  expect(second).toEqual({ kind: 'held' });
  expect(await taskRow(s.admin, id)).toMatchObject({ lease_owner: 'w1', lease_epoch: 1 });
  expect(await eventTypes(s.admin, id)).toEqual(['task.started']);
});

test('an expired lease is taken over with a new epoch, recorded as task.lease_taken', async () => {
  const id = await insertTask(s.admin);
  await claimTask(s.worker, { taskId: id, workerId: 'w1', leaseMs: 60_000 });
  await expireLease(s.admin, id);
  const takeover = await claimTask(s.worker, { taskId: id, workerId: 'w2', leaseMs: 60_000 });
  expect(takeover).toMatchObject({ kind: 'claimed', lease: { owner: 'w2', epoch: 2 } });
  expect(takeover.kind === 'claimed' && takeover.firstStart).toBe(false);
  expect(await taskRow(s.admin, id)).toMatchObject({ lease_owner: 'w2', attempts: 2 });
  expect(await eventTypes(s.admin, id)).toEqual(['task.started', 'task.lease_taken']);
});

test('two workers claiming at once: exactly one gets the lease', async () => {
  const id = await insertTask(s.admin);
  const outcomes = await Promise.all(
    ['w1', 'w2', 'w3'].map((w) =>
      claimTask(s.worker, { taskId: id, workerId: w, leaseMs: 60_000 }),
    ),
  );
  expect(outcomes.filter((o) => o.kind === 'claimed')).toHaveLength(1);
  expect(outcomes.filter((o) => o.kind === 'held')).toHaveLength(2);
  expect(await taskRow(s.admin, id)).toMatchObject({ lease_epoch: 1, attempts: 1 });
});

test('an ended or unknown task is gone; a tool this worker does not serve is not claimed', async () => {
  const ended = await insertTask(s.admin);
  await s.admin.query(`UPDATE app.tasks SET status = 'failed', ended_at = now() WHERE id = $1`, [
    ended,
  ]);
  expect(await claimTask(s.worker, { taskId: ended, workerId: 'w1', leaseMs: 1000 })).toEqual({
    kind: 'gone',
  });
  expect(await claimTask(s.worker, { taskId: 'nope', workerId: 'w1', leaseMs: 1000 })).toEqual({
    kind: 'gone',
  });
  const other = await insertTask(s.admin);
  const served = new Map([['another_tool', 'f']]);
  expect(
    await claimTask(s.worker, { taskId: other, workerId: 'w1', leaseMs: 1000, served }),
  ).toMatchObject({ kind: 'unservable', tool: 'slow_tool' });
  expect(await taskRow(s.admin, other)).toMatchObject({ lease_owner: null, lease_epoch: 0 });
});

test("each claim's event tells what it took: the row's owner, the epoch and the attempt", async () => {
  const id = await insertTask(s.admin, { subject: 'o\'brien "x" \\ \t 😀' });
  await claimTask(s.worker, { taskId: id, workerId: 'w1', leaseMs: 60_000 });
  await expireLease(s.admin, id);
  await claimTask(s.worker, { taskId: id, workerId: 'w2', leaseMs: 60_000 });
  const { rows } = await s.admin.query<{ type: string; body: string }>(
    `SELECT type, body FROM audit.events WHERE task_id = $1 ORDER BY seq`,
    [id],
  );
  // As each event would read written whole in JavaScript from the claimed row.
  const about = {
    taskId: id,
    tenant: 'acme',
    subject: 'o\'brien "x" \\ \t 😀',
    client: 'agent',
    tool: 'slow_tool',
    correlationId: 'c',
  };
  const claimEvent = (worker: string, epoch: number) => ({
    ...about,
    actor: { subject: worker, kind: 'worker' },
    data: { worker, epoch, attempt: epoch },
  });
  expect(rows).toEqual([
    { type: 'task.started', body: canonicalJson(claimEvent('w1', 1)) },
    { type: 'task.lease_taken', body: canonicalJson(claimEvent('w2', 2)) },
  ]);
});

test('the claim reads the sealed delegation with the lease, and how long it has left', async () => {
  const id = await insertTask(s.admin);
  await insertSealedDelegation(s.admin, id, { keyId: 'k1', expiresInS: 90 });
  const c = await claimTask(s.worker, { taskId: id, workerId: 'w1', leaseMs: 60_000 });
  if (c.kind !== 'claimed') throw new Error(`not claimed: ${c.kind}`);
  expect(c.delegation?.sealed).toEqual({
    keyId: 'k1',
    iv: Buffer.from([1]),
    ciphertext: Buffer.from([2]),
    tag: Buffer.from([3]),
  });
  expect(c.delegation!.remainingMs).toBeGreaterThan(80_000);
  expect(c.delegation!.remainingMs).toBeLessThanOrEqual(90_000);

  const without = await insertTask(s.admin);
  const d = await claimTask(s.worker, { taskId: without, workerId: 'w1', leaseMs: 60_000 });
  expect(d).toMatchObject({ kind: 'claimed', delegation: null });
});

describe('claimNextJob: pg-boss fetch and claim in one statement', () => {
  const claimNext = async (workerId: string) =>
    claimNextJob<{ taskId: string }>(s.worker, {
      queue: QUEUE,
      fetch: await jobFetch(s.queue.boss, QUEUE),
      workerId,
      leaseMs: 60_000,
    });
  const job = async (id: string) =>
    (
      await s.admin.query<{ state: string; same_instant: boolean }>(
        `SELECT j.state, j.started_on = t.started_at AS same_instant
           FROM pgboss.job j JOIN app.tasks t ON t.job_id = j.id WHERE t.id = $1`,
        [id],
      )
    ).rows[0];

  test('the next job is activated and its task claimed by the same transaction, its event written', async () => {
    const id = await insertTask(s.admin);
    const jobId = (await taskJobId(id))!;
    await s.queue.boss.send(QUEUE, { taskId: id }, { id: jobId });
    const got = await claimNext('w1');
    expect(got?.job).toMatchObject({ id: jobId, name: QUEUE, data: { taskId: id }, retryCount: 0 });
    expect(got?.claim).toMatchObject({ kind: 'claimed', lease: { owner: 'w1', epoch: 1 } });
    expect(got?.claim?.task.id).toBe(id);
    // One transaction: the job's start and the task's are the same now().
    expect(await job(id)).toEqual({ state: 'active', same_instant: true });
    expect(await eventTypes(s.admin, id)).toEqual(['task.started']);
    expect(await claimNext('w1')).toBeUndefined();
  });

  test('a job whose task is held elsewhere is fetched without a claim; nothing else is written', async () => {
    const id = await insertTask(s.admin);
    await claimTask(s.worker, { taskId: id, workerId: 'w1', leaseMs: 60_000 });
    await s.queue.boss.send(QUEUE, { taskId: id }, { id: (await taskJobId(id))! });
    const got = await claimNext('w2');
    expect(got?.job.data).toEqual({ taskId: id });
    expect(got?.claim).toBeUndefined();
    expect(await taskRow(s.admin, id)).toMatchObject({ lease_owner: 'w1', lease_epoch: 1 });
    expect(await eventTypes(s.admin, id)).toEqual(['task.started']);
    expect((await job(id))?.state).toBe('active');
  });

  test("with tracing on, the claim's event carries the job's trace id, as if written in the run's span; a job without a valid one, none", async () => {
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    try {
      const traceId = 'ab'.repeat(16);
      const cases = [
        { traceparent: `00-${traceId}-${'cd'.repeat(8)}-01`, expected: traceId },
        { traceparent: `00-${'0'.repeat(32)}-${'cd'.repeat(8)}-01`, expected: undefined },
        { traceparent: 'not-a-trace', expected: undefined },
        { traceparent: undefined, expected: undefined },
      ];
      for (const c of cases) {
        const id = await insertTask(s.admin);
        await s.queue.boss.send(
          QUEUE,
          { taskId: id, ...(c.traceparent ? { traceparent: c.traceparent } : {}) },
          { id: (await taskJobId(id))! },
        );
        expect((await claimNext('w1'))?.claim?.task.id).toBe(id);
        const { rows } = await s.admin.query<{ body: string }>(
          `SELECT body FROM audit.events WHERE task_id = $1 AND type = 'task.started'`,
          [id],
        );
        expect(JSON.parse(rows[0]!.body).traceId).toBe(c.expected);
      }
    } finally {
      propagation.disable();
    }
  });

  test('a pg-boss that fetches another way is refused, not guessed at', async () => {
    const fetchWith = (text: string) => ({
      fetch: async (_name: string, o: { db: { executeSql: (t: string) => Promise<unknown> } }) => {
        await o.db.executeSql(text);
        return [];
      },
    });
    await expect(jobFetch(fetchWith('SELECT id FROM pgboss.job') as never, QUEUE)).rejects.toThrow(
      /cannot claim the task with its fetch/,
    );
    await expect(
      jobFetch(
        fetchWith(
          'WITH next AS (SELECT 1)\n UPDATE pgboss.job j SET state = 1 FROM next RETURNING j.id',
        ) as never,
        QUEUE,
      ),
    ).rejects.toThrow(/cannot claim the task with its fetch/);
    // The same refusal, of the same class, as a completion of another shape: the worker tells
    // it from a passing error by that class alone.
    await expect(
      jobFetch(fetchWith('SELECT id FROM pgboss.job') as never, QUEUE),
    ).rejects.toBeInstanceOf(UnbuiltStatement);
    const completeWith = {
      complete: async (
        _name: string,
        _id: unknown,
        _data: unknown,
        o: { db: { executeSql: (t: string) => Promise<unknown> } },
      ) => o.db.executeSql('UPDATE pgboss.job SET state = 1'),
    };
    await expect(
      jobCompletion(completeWith as never, { name: QUEUE, id: 'j', retryCount: 0 }),
    ).rejects.toBeInstanceOf(UnbuiltStatement);
  });
});

async function taskJobId(id: string): Promise<string | undefined> {
  const r = await s.admin.query<{ job_id: string }>('SELECT job_id FROM app.tasks WHERE id = $1', [
    id,
  ]);
  return r.rows[0]?.job_id;
}
