import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire } from '../support/wires.ts';

// The gateway serves versioned_echo with the v1 schema, the only worker with v2: the worker
// must never run (or loop on) a task whose tool it serves with another input schema.
let stack: Stack;
let token: string;
const wire = () => jobToolsWire(stack.mcpUrl);

beforeAll(async () => {
  stack = await startStack({
    workers: 0,
    env: {
      TOOL_PACKS: './test/fixtures/packs/versioned.ts',
      FIXTURE_SCHEMA: 'v1',
      TOOL_LIMITS: JSON.stringify({ versioned_echo: { defaultDeadlineMs: 4000 } }),
    },
  });
  await stack.addWorker({ WORKER_ID: 'worker-v2', FIXTURE_SCHEMA: 'v2' });
  token = await stack.token('vera', 'acme');
});
afterAll(async () => {
  await stack?.close();
});

test('a worker with another schema of the tool never runs its task; the task says what it waits for and ends at its deadline', async () => {
  const taskId = await wire().start(token, 'versioned_echo', { text: 'hello' });
  const waiting = await pollUntil(
    async () => (await wire().get(token, taskId)) as any,
    (a) => a.ok && a.value.statusMessage === 'waiting for a worker that runs versioned_echo',
    10_000,
    100,
  );
  expect(waiting.value.status).toBe('working');

  const ended = await pollUntil(
    async () => (await wire().get(token, taskId)) as any,
    (a) => a.ok && a.value.status !== 'working',
    15_000,
    200,
  );
  expect(ended.value.status).toBe('failed');
  expect(ended.value.statusMessage).toMatch(
    /waiting for a worker that runs versioned_echo, and none came/,
  );

  const [row] = await sql(
    stack.db.url,
    `SELECT attempts, lease_epoch, tool_fingerprint, job_queue FROM app.tasks WHERE id = $1`,
    [taskId],
  );
  expect(row).toMatchObject({ attempts: 0 });
  expect(row.tool_fingerprint).toBe(stack.registry.entry('versioned_echo')!.fingerprint);
  const [job] = await sql(
    stack.db.url,
    `SELECT retry_count FROM pgboss.job WHERE data ->> 'taskId' = $1`,
    [taskId],
  );
  expect(job.retry_count).toBe(0);
  const started = await sql(
    stack.db.url,
    `SELECT count(*)::int AS n FROM audit.events WHERE task_id = $1 AND type IN ('task.started', 'task.step_completed')`,
    [taskId],
  );
  expect(started[0].n).toBe(0);
});
