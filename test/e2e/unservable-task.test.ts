import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire } from '../support/wires.ts';

// A job that reaches a worker which does not run its task's tool at the task's schema (a
// misrouted job: a queue shared across versions, or a fingerprint changed under it) is left
// unclaimed — no lease, no attempt, no task.started — and says what it waits for.
let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ workers: 0, env: { DEMO_STEP_MS: '20' } });
});
afterAll(async () => {
  await stack?.close();
});

test('a task at a schema this worker does not run is not claimed, and says what it waits for', async () => {
  const wire = jobToolsWire(stack.mcpUrl);
  const token = await stack.token('uma', 'acme');
  const id = await wire.start(token, 'generate_report', { report: 'misrouted' });
  await sql(stack.db.url, `UPDATE app.tasks SET tool_fingerprint = $2 WHERE id = $1`, [
    id,
    'f'.repeat(64),
  ]);
  await stack.addWorker();
  const row = await pollUntil(
    async () =>
      (
        await sql(
          stack.db.url,
          `SELECT status, status_message, lease_owner, attempts, started_at FROM app.tasks WHERE id = $1`,
          [id],
        )
      )[0],
    (r) => /^waiting for a worker that runs generate_report/.test(r.status_message),
    15_000,
  );
  expect(row).toMatchObject({
    status: 'working',
    lease_owner: null,
    attempts: 0,
    started_at: null,
  });
  expect(row.status_message).toBe(
    'waiting for a worker that runs generate_report (schema ffffffffffff)',
  );
  const events = await sql(
    stack.db.url,
    `SELECT type FROM audit.events WHERE task_id = $1 AND type IN ('task.started', 'task.lease_taken')`,
    [id],
  );
  expect(events).toEqual([]);
});
