import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire } from '../support/wires.ts';

// Two pools with disjoint WORKER_TOOLS: one for reports, one for record updates.
let stack: Stack;
let token: string;
const wire = () => jobToolsWire(stack.mcpUrl);

beforeAll(async () => {
  stack = await startStack({
    workers: 0,
    env: {
      DEMO_STEP_MS: '50',
      TOOL_LIMITS: JSON.stringify({ generate_report: { defaultDeadlineMs: 4000 } }),
    },
  });
  await stack.addWorker({ WORKER_ID: 'pool-reports', WORKER_TOOLS: 'generate_report' });
  await stack.addWorker({ WORKER_ID: 'pool-records', WORKER_TOOLS: 'bulk_update_records' });
  token = await stack.token('olga', 'acme');
});
afterAll(async () => {
  await stack?.close();
});

const status = async (taskId: string) => {
  const a = await wire().get(token, taskId);
  if (!a.ok) throw new Error(a.error);
  return a.value as { status: string; statusMessage?: string };
};
const startedBy = async (taskId: string) =>
  (
    await sql(
      stack.db.url,
      `SELECT body::jsonb -> 'data' ->> 'worker' AS worker FROM audit.events
        WHERE task_id = $1 AND type = 'task.started'`,
      [taskId],
    )
  ).map((r) => r.worker);

test('each pool picks up only the tools it serves', async () => {
  const reports = await Promise.all(
    [1, 2, 3].map((i) => wire().start(token, 'generate_report', { report: `pool-${i}` })),
  );
  const records = await Promise.all(
    [1, 2, 3].map((i) =>
      wire().start(token, 'bulk_update_records', {
        collection: `pool-${i}`,
        count: 10,
        patch: { a: 1 },
      }),
    ),
  );
  for (const id of [...reports, ...records]) {
    await pollUntil(
      () => status(id),
      (s) => s.status === 'completed',
      20_000,
      50,
    );
  }
  for (const id of reports) expect(await startedBy(id)).toEqual(['pool-reports']);
  for (const id of records) expect(await startedBy(id)).toEqual(['pool-records']);
});

test("with one tool's pool stopped, its tasks wait and say so, the other tool's tasks still run, and the waiting ones end at their deadline with the reason", async () => {
  await stack.workers[0]!.stop(); // pool-reports
  const waiting = await wire().start(token, 'generate_report', { report: 'nobody-runs-me' });
  const other = await wire().start(token, 'bulk_update_records', {
    collection: 'still-runs',
    count: 10,
    patch: { b: 2 },
  });
  await pollUntil(
    () => status(other),
    (s) => s.status === 'completed',
    20_000,
    50,
  );

  // The gateway knows the live workers as of the last second (worker-directory.ts): a read
  // within a second of the pool's stop may still say "queued".
  const seen = await pollUntil(
    () => status(waiting),
    (s) => s.statusMessage !== 'queued',
    3_000,
    50,
    'the status to say what the task waits for',
  );
  expect(seen).toMatchObject({
    status: 'working',
    statusMessage: 'waiting for a worker that runs generate_report',
  });
  const metrics = await (await fetch(new URL('/metrics', stack.gatewayUrl))).text();
  expect(metrics).toMatch(/^mtg_tasks_unserved\{[^}]*tool="generate_report"[^}]*\} 1$/m);
  // Nobody claimed it, and its job was never fetched (no retry loop).
  expect(await startedBy(waiting)).toEqual([]);
  const [job] = await sql(
    stack.db.url,
    `SELECT state, retry_count FROM pgboss.job WHERE data ->> 'taskId' = $1`,
    [waiting],
  );
  expect(job).toMatchObject({ state: 'created', retry_count: 0 });

  // The other pool's maintenance ends it at its deadline (4 s here), saying why.
  const ended = await pollUntil(
    () => status(waiting),
    (s) => s.status !== 'working',
    15_000,
    200,
  );
  expect(ended.status).toBe('failed');
  expect(ended.statusMessage).toBe(
    'Deadline exceeded before the task could finish: it was waiting for a worker that runs generate_report, and none came',
  );
});
