import type { ChildProcess } from 'node:child_process';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { coreWire, jobToolsWire } from '../support/wires.ts';
import { startWorkerProcess, waitForExit } from '../support/worker-process.ts';

let stack: Stack;
const children: ChildProcess[] = [];
beforeAll(async () => {
  stack = await startStack({ workers: 0, env: { DEMO_STEP_MS: '300', WORKER_LEASE_MS: '2000' } });
  children.push(
    await startWorkerProcess(stack, 'crash-a'),
    await startWorkerProcess(stack, 'crash-b'),
  );
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await Promise.all(children.map(waitForExit));
  await stack?.close();
});

test('SIGKILL the worker running a task: another worker finishes it, no finished step runs twice, each write lands once', async () => {
  const wire = jobToolsWire(stack.mcpUrl);
  const token = await stack.token('sam', 'acme');
  const taskId = await wire.start(token, 'bulk_update_records', {
    collection: 'crash',
    count: 4000,
    patch: { s: 1 },
  });
  // Wait until some batches are journaled, then kill whoever holds the lease.
  const [{ lease_owner }] = await pollUntil(
    () =>
      sql(
        stack.db.url,
        `SELECT lease_owner, (SELECT count(*)::int FROM app.task_steps WHERE task_id = $1) AS steps FROM app.tasks WHERE id = $1`,
        [taskId],
      ),
    (r) => r[0].lease_owner && r[0].steps >= 2,
    20_000,
    50,
  );
  const victim = lease_owner === 'crash-a' ? children[0]! : children[1]!;
  const killedAt = Date.now();
  victim.kill('SIGKILL');
  await waitForExit(victim);

  // Until another worker takes it, tasks/get says the worker was lost (not its last step);
  // once taken over, the task speaks for itself again.
  const core = coreWire(stack.mcpUrl);
  const lost = await pollUntil(
    () => core.get(token, taskId),
    (r) => r.ok && r.value.statusMessage === 'worker lost; resuming',
    15_000,
    50,
  );
  expect(lost.ok && lost.value.status).toBe('working');
  await pollUntil(
    () => core.get(token, taskId),
    (r) => r.ok && r.value.statusMessage !== 'worker lost; resuming',
    15_000,
    50,
  );

  const [row] = await pollUntil(
    () => sql(stack.db.url, 'SELECT status, lease_epoch FROM app.tasks WHERE id = $1', [taskId]),
    (r) => r[0].status !== 'working',
    60_000,
    100,
  );
  expect(row.status).toBe('completed');
  expect(Number(row.lease_epoch)).toBeGreaterThanOrEqual(2);

  const takeover = await sql(
    stack.db.url,
    `SELECT occurred_at, body FROM audit.events WHERE task_id = $1 AND type = 'task.lease_taken' ORDER BY seq LIMIT 1`,
    [taskId],
  );
  expect(takeover).toHaveLength(1);
  console.log(
    `worker SIGKILL → task resumed by another worker after ${new Date(takeover[0].occurred_at).getTime() - killedAt} ms`,
  );

  // 8 batches: each journaled once, each completed-step event once, each write once.
  const steps = await sql(stack.db.url, 'SELECT step FROM app.task_steps WHERE task_id = $1', [
    taskId,
  ]);
  expect(steps.map((s) => s.step).sort()).toEqual(
    Array.from({ length: 8 }, (_, i) => `batch:${i}`).sort(),
  );
  const completedEvents = await sql(
    stack.db.url,
    `SELECT body::jsonb->'data'->>'step' AS step, count(*)::int AS n FROM audit.events
      WHERE task_id = $1 AND type = 'task.step_completed' GROUP BY 1`,
    [taskId],
  );
  expect(completedEvents.every((e) => e.n === 1)).toBe(true);
  const writes = await stack.writes(taskId);
  expect(writes).toHaveLength(8);
  expect(new Set(writes.map((w) => w.idempotencyKey)).size).toBe(8);
});
