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

/** Runs one 1-step task to its end; how long after task.started its exchange was recorded. */
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
  const events = await sql<{ type: string; ms: number }>(
    stack.db.url,
    `SELECT type, extract(epoch FROM occurred_at - min(occurred_at) OVER ()) * 1000 AS ms
       FROM audit.events WHERE task_id = $1 AND type IN ('task.started', 'task.identity_refreshed')
      ORDER BY seq`,
    [id],
  );
  expect(events.map((e) => e.type)).toEqual(['task.started', 'task.identity_refreshed']);
  return Number(events[1]!.ms);
}

test("a stage exchanges as it begins once the tool's runs have called the target", async () => {
  // The worker's first run of the tool: the exchange waits for the call, after the sleep.
  expect(await exchangeDelayOf('petra')).toBeGreaterThanOrEqual(STEP_MS);
  // Later runs: the exchange runs during the sleep, and is recorded before it ends.
  expect(await exchangeDelayOf('quinn')).toBeLessThan(STEP_MS);
  expect(await exchangeDelayOf('petra')).toBeLessThan(STEP_MS);
});
