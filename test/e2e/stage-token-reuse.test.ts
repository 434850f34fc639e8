import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire, runToEnd } from '../support/wires.ts';

// A downstream token is reused across stages while it is young (STAGE_TOKEN_REUSE_SECONDS,
// 60 by default): one exchange, one task.identity_refreshed, for a task whose stages follow
// each other; with 0, every stage exchanges again. Either way every write is the user's, by
// the worker, and revocation is read at every boundary (revocation.test.ts).
async function refreshesOf(stack: Stack, user: string) {
  const token = await stack.token(user, 'acme');
  const { id, answer } = await runToEnd(jobToolsWire(stack.mcpUrl), token, 'bulk_update_records', {
    collection: `reuse-${user}`,
    count: 1500, // three batches of 500: three stages, each writing downstream
    patch: { k: 1 },
  });
  expect(answer).toMatchObject({ ok: true, value: { status: 'completed' } });
  const writes = await stack.writes(id);
  expect(writes).toHaveLength(3);
  expect(writes.every((w) => w.sub === user && (w.act as any)?.sub === 'mcp-worker')).toBe(true);
  const events = await sql(
    stack.db.url,
    `SELECT type FROM audit.events WHERE task_id = $1 AND type = 'task.identity_refreshed'`,
    [id],
  );
  return events.length;
}

describe('by default', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ workers: 1, env: { DEMO_STEP_MS: '20' } });
  });
  afterAll(async () => {
    await stack?.close();
  });
  test('stages that follow each other share one downstream token: one exchange', async () => {
    expect(await refreshesOf(stack, 'rhea')).toBe(1);
  });
});

describe('with STAGE_TOKEN_REUSE_SECONDS=0', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      workers: 1,
      env: { DEMO_STEP_MS: '20', STAGE_TOKEN_REUSE_SECONDS: '0' },
    });
  });
  afterAll(async () => {
    await stack?.close();
  });
  test('every stage exchanges again', async () => {
    expect(await refreshesOf(stack, 'sven')).toBe(3);
  });
});
