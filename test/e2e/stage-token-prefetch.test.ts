import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire, runToEnd } from '../support/wires.ts';

// A stage exchanges for the targets its tool's runs called before as it begins, so the
// tool's own work before its first call (here a 3 s sleep) hides the exchange. The first
// run of a tool on a worker has no such history: it exchanges at its first call. Either way
// one exchange, one task.identity_refreshed, and every write is the user's, by the worker.
const STEP_MS = 3000;

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ workers: 1, env: { DEMO_STEP_MS: String(STEP_MS) } });
});
afterAll(async () => {
  await stack?.close();
});

let runs = 0;

/** Runs one 1-step task to its end; how long after its run's claim its exchange was recorded. */
async function exchangeDelayOf(user: string): Promise<number> {
  const token = await stack.token(user, 'acme');
  const { id, answer } = await runToEnd(jobToolsWire(stack.mcpUrl), token, 'bulk_update_records', {
    collection: `prefetch-${user}-${++runs}`, // identical arguments would be deduplicated
    count: 500, // one batch: one stage that sleeps, then writes downstream
    patch: { k: 1 },
  });
  expect(answer).toMatchObject({ ok: true, value: { status: 'completed' } });
  const writes = await stack.writes(id);
  expect(writes).toHaveLength(1);
  expect(writes[0]).toMatchObject({ sub: user, act: { sub: 'mcp-worker' } });
  // Each claim of the task begins a run: task.started, or task.lease_taken when a run lost
  // its lease (a renewal late on a loaded machine) or was retried and the task was claimed
  // again. The claim is one exchange per run, never two; a run may end before its call.
  const events = await sql<{ type: string; ms: number }>(
    stack.db.url,
    `SELECT type, extract(epoch FROM occurred_at - max(occurred_at) FILTER (
                   WHERE type <> 'task.identity_refreshed') OVER (ORDER BY seq)) * 1000 AS ms
       FROM audit.events
      WHERE task_id = $1
        AND type IN ('task.started', 'task.lease_taken', 'task.identity_refreshed')
      ORDER BY seq`,
    [id],
  );
  const byRun: string[][] = [];
  for (const e of events) {
    if (e.type === 'task.identity_refreshed') byRun.at(-1)?.push(e.type);
    else byRun.push([e.type]);
  }
  expect(byRun[0]?.[0]).toBe('task.started');
  // At most one exchange in each run, and one in some run (the write needed it).
  expect(byRun).toEqual(byRun.map(([claim, ...rest]) => [claim, ...rest.slice(0, 1)]));
  expect(byRun.some((r) => r.length === 2)).toBe(true);
  // How long after its run's claim the first exchange was recorded.
  return Number(events.find((e) => e.type === 'task.identity_refreshed')!.ms);
}

test("a stage exchanges as it begins once the tool's runs have called the target", async () => {
  // The worker's first run of the tool: the exchange waits for the call, after the sleep.
  expect(await exchangeDelayOf('petra')).toBeGreaterThanOrEqual(STEP_MS);
  // Later runs: the exchange runs during the sleep, and is recorded before it ends.
  expect(await exchangeDelayOf('quinn')).toBeLessThan(STEP_MS);
  expect(await exchangeDelayOf('petra')).toBeLessThan(STEP_MS);
});
