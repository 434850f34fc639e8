import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { runToEnd, coreWire } from '../support/wires.ts';

// DATABASE_POOL_MAX bounds the sessions each process holds, whatever its slots or its callers
// ask for at once: eight slots busy and eight starts in flight run on three sessions each.
let stack: Stack;

beforeAll(async () => {
  stack = await startStack({
    workers: 1,
    env: { DATABASE_POOL_MAX: '3', WORKER_CONCURRENCY: '8', DEMO_STEP_MS: '40' },
  });
});
afterAll(async () => {
  await stack?.close();
});

/** The most sessions each application name held on the test database while `work` ran. */
async function peakSessions(work: () => Promise<unknown>): Promise<Map<string, number>> {
  const peak = new Map<string, number>();
  let running = true;
  const sample = (async () => {
    while (running) {
      const rows = await sql<{ app: string; n: number }>(
        stack.db.url,
        `SELECT application_name AS app, count(*)::int AS n FROM pg_stat_activity
          WHERE datname = $1 AND pid <> pg_backend_pid() GROUP BY 1`,
        [stack.db.name],
      );
      for (const { app, n } of rows) peak.set(app, Math.max(peak.get(app) ?? 0, n));
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  try {
    await work();
  } finally {
    running = false;
    await sample;
  }
  return peak;
}

test('eight tasks started and run at once hold at most DATABASE_POOL_MAX sessions per process', async () => {
  const token = await stack.token('pooler', 'acme');
  const wire = coreWire(stack.mcpUrl);
  const ends: Array<{ status?: string }> = [];
  const peak = await peakSessions(async () => {
    const runs = Array.from({ length: 8 }, (_, i) =>
      runToEnd(wire, token, 'bulk_update_records', {
        collection: `pooled-${i}`,
        count: 1000,
        patch: { a: 1 },
      }),
    );
    for (const { answer } of await Promise.all(runs)) ends.push(answer.ok ? answer.value : {});
  });
  // The worker's sessions carry its id (the stack's test-worker-N). The gateway's listeners
  // for task events ('task-events') are sessions of their own, outside its pool.
  const workers = [...peak].filter(([app]) => app.startsWith('test-worker-'));
  expect(workers).toHaveLength(1);
  const worker = workers[0]![0];
  expect(ends.map((e) => e.status)).toEqual(Array(8).fill('completed'));
  expect(peak.get('gateway')).toBeGreaterThan(0);
  expect(peak.get(worker)).toBeGreaterThan(0);
  expect(peak.get('gateway')).toBeLessThanOrEqual(3);
  expect(peak.get(worker)).toBeLessThanOrEqual(3);
});
