import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { coreWire, extWire, jobToolsWire } from '../support/wires.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ workers: 1, env: { DEMO_STEP_MS: '150' } });
});
afterAll(async () => {
  await stack?.close();
});

test.each([
  ['job-tools', () => jobToolsWire(stack.mcpUrl)],
  ['core-tasks', () => coreWire(stack.mcpUrl)],
  ['tasks-extension', () => extWire(stack.mcpUrl)],
])(
  'cancel mid-run on the %s wire: cancelled, and no downstream write lands after cancel returned',
  async (_n, wireOf) => {
    const wire = wireOf();
    const token = await stack.token('kim', 'acme');
    const taskId = await wire.start(token, 'bulk_update_records', {
      collection: `cx-${_n}`,
      count: 20_000,
      patch: { y: 1 },
    });
    // Let some batches land first.
    await pollUntil(
      () => stack.writes(taskId),
      (w) => w.length >= 2,
      10_000,
      50,
      'two downstream writes before the cancel',
    );
    const answer = await wire.cancel(token, taskId);
    const returnedAt = Date.now();
    expect(answer.ok).toBe(true);
    const [row] = await sql(
      stack.db.url,
      `SELECT status, outcome, ended_by FROM app.tasks WHERE id = $1`,
      [taskId],
    );
    expect(row).toMatchObject({
      status: 'cancelled',
      outcome: 'cancelled',
      ended_by: { path: 'owner' },
    });
    const before = await stack.writes(taskId);
    await new Promise((r) => setTimeout(r, 800)); // several step lengths
    const after = await stack.writes(taskId);
    expect(after).toEqual(before);
    expect(after.every((w) => Date.parse(w.at) <= returnedAt)).toBe(true);
    expect(after.length).toBeLessThan(40); // it really stopped early
    // What was done is recorded: every journaled batch landed, and every batch that landed is
    // journaled but the one in flight when the cancel came: its write can commit downstream
    // in the instant the cancel aborts the call, before its answer (and so its journal row)
    // is back. Its write is in the downstream's record, under the task's idempotency key.
    const steps = await sql(stack.db.url, `SELECT step FROM app.task_steps WHERE task_id = $1`, [
      taskId,
    ]);
    expect(steps.length).toBeLessThanOrEqual(after.length);
    expect(after.length - steps.length).toBeLessThanOrEqual(1);
  },
);

test('terminal states never change: a cancelled task stays cancelled', async () => {
  const wire = jobToolsWire(stack.mcpUrl);
  const token = await stack.token('kim', 'acme');
  const taskId = await wire.start(token, 'generate_report', { report: 'never-changes' });
  await wire.cancel(token, taskId);
  // The same cancel again (a retry whose first answer was lost) is answered as the first
  // was, and changes nothing (test/e2e/cancel-unknown-commit.test.ts); a cancel of a task
  // that ended otherwise is refused (test/e2e/core-tasks-wire.test.ts).
  const again = await wire.cancel(token, taskId);
  expect(again).toMatchObject({ ok: true, value: { status: 'cancelled' } });
  await new Promise((r) => setTimeout(r, 1000));
  expect(await wire.get(token, taskId)).toMatchObject({ ok: true, value: { status: 'cancelled' } });
});

test('restarting the gateway mid-task: the client keeps polling the same task to completion', async () => {
  const token = await stack.token('lou', 'acme');
  const client = await connectV1(stack.mcpUrl, token);
  const started = await client.callTool({
    name: 'generate_report',
    arguments: { report: 'restart', rows: 10 },
  });
  const jobId = (started.structuredContent as any).jobId;
  await client.close();
  await stack.restartGateway();
  const again = await connectV1(stack.mcpUrl, token);
  const status = await pollUntil(
    async () =>
      (await again.callTool({ name: 'get_job_status', arguments: { jobId } }))
        .structuredContent as any,
    (s) => s.status !== 'working',
  );
  expect(status.status).toBe('completed');
  const result = await again.callTool({ name: 'get_job_result', arguments: { jobId } });
  expect(result.structuredContent).toMatchObject({ report: 'restart', rows: 10 });
  await again.close();
});
