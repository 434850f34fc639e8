import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { coreWire, extWire, jobToolsWire } from '../support/wires.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    workers: 2,
    env: { MAX_ACTIVE_TASKS_PER_USER: '3', DERIVED_DEDUPE_WINDOW_MS: '0', DEMO_STEP_MS: '100' },
  });
});
afterAll(async () => {
  await stack?.close();
});

test('20 concurrent identical starts make exactly one task, one job and one set of downstream writes', async () => {
  const token = await stack.token('dana', 'acme');
  const args = { branch: 'main', services: ['api', 'web', 'db'] };
  const ids = await Promise.all(
    Array.from({ length: 20 }, () =>
      rpc2026(
        stack.mcpUrl,
        token,
        'tools/call',
        { name: 'provision_test_environment', arguments: args },
        { tasksExtension: true },
      ).then((r) => r.body.result.taskId as string),
    ),
  );
  expect(new Set(ids).size).toBe(1);
  const taskId = ids[0]!;
  expect(await sql(stack.db.url, `SELECT id FROM app.tasks WHERE subject = 'dana'`)).toHaveLength(
    1,
  );
  expect(
    await sql(stack.db.url, `SELECT id FROM pgboss.job WHERE data->>'taskId' = $1`, [taskId]),
  ).toHaveLength(1);
  const done = await pollUntil(
    async () =>
      (await sql(stack.db.url, `SELECT status FROM app.tasks WHERE id = $1`, [taskId]))[0].status,
    (s) => s !== 'working',
  );
  expect(done).toBe('completed');
  const writes = await stack.writes(taskId);
  expect(writes).toHaveLength(6); // namespace, permissions, 3 deployments, database
  expect(new Set(writes.map((w) => w.idempotencyKey)).size).toBe(6);
});

test('the same explicit idempotency key with different arguments is a clear error and creates nothing', async () => {
  const token = await stack.token('erin', 'acme');
  const client = await connectV1(stack.mcpUrl, token);
  const meta = { 'io.mcp-task-gateway/idempotency-key': 'nightly-42' };
  const first = await client.callTool({
    name: 'generate_report',
    arguments: { report: 'a' },
    _meta: meta,
  });
  const again = await client.callTool({
    name: 'generate_report',
    arguments: { report: 'a' },
    _meta: meta,
  });
  expect((again.structuredContent as any).jobId).toBe((first.structuredContent as any).jobId);
  const other = await client.callTool({
    name: 'generate_report',
    arguments: { report: 'b' },
    _meta: meta,
  });
  expect(other.isError).toBe(true);
  expect((other.content as any)[0].text).toMatch(/already used for a different call/);
  expect(await sql(stack.db.url, `SELECT id FROM app.tasks WHERE subject = 'erin'`)).toHaveLength(
    1,
  );
  await client.close();
});

test('a derived key stops deduplicating once the earlier task ended and its window passed', async () => {
  const token = await stack.token('fay', 'acme');
  const wire = jobToolsWire(stack.mcpUrl);
  const first = await wire.start(token, 'generate_report', { report: 'daily' });
  await pollUntil(
    () => wire.get(token, first),
    (a) => a.ok && a.value.status === 'completed',
  );
  const second = await wire.start(token, 'generate_report', { report: 'daily' });
  expect(second).not.toBe(first);
});

test('the per-user cap holds under a concurrent burst and says which limit and when to retry', async () => {
  const token = await stack.token('gus', 'acme');
  const wire = extWire(stack.mcpUrl);
  const outcomes = await Promise.all(
    Array.from({ length: 10 }, (_, i) =>
      rpc2026(
        stack.mcpUrl,
        token,
        'tools/call',
        {
          name: 'bulk_update_records',
          arguments: { collection: `burst-${i}`, count: 5000, patch: { i } },
        },
        { tasksExtension: true },
      ),
    ),
  );
  const started = outcomes.filter((o) => o.body.result?.taskId);
  const refused = outcomes.filter((o) => o.body.error);
  expect(started).toHaveLength(3);
  expect(refused).toHaveLength(7);
  expect(refused[0]!.body.error).toMatchObject({
    code: -32000,
    data: { reason: 'user_limit', retryAfterSeconds: expect.any(Number) },
  });
  expect(refused[0]!.body.error.message).toMatch(/limit 3/);
  const active = await sql(
    stack.db.url,
    `SELECT count(*)::int AS n FROM app.tasks WHERE subject = 'gus' AND status = 'working'`,
  );
  expect(active[0].n).toBe(3);
  for (const s of started) await wire.cancel(token, s.body.result.taskId);
});

test.each([
  ['job tools', () => jobToolsWire(stack.mcpUrl)],
  ['core tasks', () => coreWire(stack.mcpUrl)],
])(
  'bad arguments get the tool’s validation error on the %s wire and create nothing',
  async (_n, wireOf) => {
    const token = await stack.token('hal', 'acme');
    const client = await connectV1(stack.mcpUrl, token);
    const r = await client.callTool({
      name: 'provision_test_environment',
      arguments: { branch: '', services: [] },
    });
    expect(r.isError).toBe(true);
    expect((r.content as any)[0].text).toMatch(/Invalid arguments/);
    await client.close();
    await expect(
      wireOf().start(token, 'bulk_update_records', { collection: 'x', count: -1, patch: {} }),
    ).rejects.toThrow();
    expect(await sql(stack.db.url, `SELECT id FROM app.tasks WHERE subject = 'hal'`)).toHaveLength(
      0,
    );
  },
);

test('a task past its deadline ends failed with a deadline reason', async () => {
  const token = await stack.token('ivy', 'acme');
  const client = await connectV1(stack.mcpUrl, token);
  const r = await client.callTool({
    name: 'bulk_update_records',
    arguments: { collection: 'slow', count: 50_000, patch: { x: 1 } },
    _meta: { 'io.mcp-task-gateway/deadline-ms': 700 },
  });
  const jobId = (r.structuredContent as any).jobId;
  const status = await pollUntil(
    async () =>
      (await client.callTool({ name: 'get_job_status', arguments: { jobId } }))
        .structuredContent as any,
    (s) => s.status !== 'working',
    15_000,
  );
  expect(status).toMatchObject({ status: 'failed', outcome: 'deadline' });
  expect(status.statusMessage).toMatch(/Deadline exceeded/);
  await client.close();
});

test('the worker completes a task’s job with its completion, and after any other ending, never before (completed, cancelled)', async () => {
  const token = await stack.token('jo', 'acme');
  const wire = extWire(stack.mcpUrl);
  const done = await wire.start(token, 'bulk_update_records', {
    collection: 'one-tx',
    count: 10,
    patch: { x: 1 },
  });
  const running = await wire.start(token, 'bulk_update_records', {
    collection: 'one-tx-cancel',
    count: 50_000,
    patch: { x: 1 },
  });
  await pollUntil(
    async () =>
      (
        await sql(
          stack.db.url,
          `SELECT count(*)::int AS n FROM app.task_steps WHERE task_id = $1`,
          [running],
        )
      )[0].n,
    (n) => n >= 1,
  );
  expect(await wire.cancel(token, running)).toMatchObject({ ok: true });
  for (const [taskId, status] of [
    [done, 'completed'],
    [running, 'cancelled'],
  ] as const) {
    // A completion completes the job in the statement that ends the task (its run's job,
    // end-task.ts); another ending is one statement and the job is completed right after it
    // (with the jobs of the runs that ended meanwhile, job-completions.ts): never before.
    const [row] = await pollUntil(
      () =>
        sql(
          stack.db.url,
          `SELECT t.status, j.state, j.completed_on >= t.ended_at AS after_the_ending,
                  j.completed_on = t.ended_at AS with_the_ending
             FROM app.tasks t JOIN pgboss.job j ON j.id = t.job_id WHERE t.id = $1`,
          [taskId],
        ),
      (rows) => rows[0]?.status === status && rows[0]?.state === 'completed',
    );
    expect(row).toMatchObject({
      status,
      state: 'completed',
      after_the_ending: true,
      with_the_ending: status === 'completed',
    });
  }
});
