// JSON-RPC batches exist only in MCP 2025-03-26 (http-errors.test.ts has the refusals for
// later revisions). Where one is allowed, each element goes through every guard alone.
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire } from '../support/wires.ts';

let stack: Stack;
beforeAll(async () => {
  // STATUS_READ_AUDIT=all: each element's read is its own event, so the trail shows which
  // elements got through (the default records one read per status per caller).
  stack = await startStack({
    workers: 0,
    env: { RATE_LIMIT_POLLS_PER_SECOND: '3', STATUS_READ_AUDIT: 'all' },
  });
});
afterAll(async () => {
  await stack?.close();
});

type Sc = Record<string, any>;

test('a 2025-03-26 batch is authorized, rate-limited and audited element by element', async () => {
  const token = await stack.token('rl-batcher', 'acme');
  const wire = jobToolsWire(stack.mcpUrl);
  const own = await wire.start(token, 'generate_report', { report: 'batched' });
  const foreign = await wire.start(await stack.token('rl-stranger', 'acme'), 'generate_report', {
    report: 'not-yours',
  });
  const status = (id: number, jobId: string) => ({
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: { name: 'get_job_status', arguments: { jobId } },
  });
  const batch = async (messages: unknown[]) => {
    const r = await fetch(stack.mcpUrl, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-03-26',
      },
      body: JSON.stringify(messages),
    });
    expect(r.status).toBe(200);
    const replies = (await r.json()) as Array<{ id: number; result: Sc }>;
    return Object.fromEntries(replies.map((m) => [m.id, m.result]));
  };
  const events = async () =>
    sql<{ type: string; reason: string | null }>(
      stack.db.url,
      `SELECT type, reason FROM audit.events
        WHERE subject = 'rl-batcher' AND type IN ('task.status_read', 'task.denied') ORDER BY seq`,
    );

  // Two elements, under the limit of 3: each authorized on its own, in a fresh poll window
  // (the gateway's clock moves past any earlier one).
  stack.clock.advance(1000);
  const mixed = await batch([status(1, own), status(2, foreign)]);
  expect(mixed[1]).toMatchObject({ structuredContent: { jobId: own, status: 'working' } });
  expect(mixed[2]).toMatchObject({ isError: true, structuredContent: { error: 'task_not_found' } });
  const first = await events();
  expect(first).toHaveLength(2);
  expect(first).toEqual(
    expect.arrayContaining([
      { type: 'task.status_read', reason: null },
      { type: 'task.denied', reason: 'other_subject' },
    ]),
  );

  // Ten elements: each costs one poll, so the limit stops some of them, each answered alone.
  stack.clock.advance(1000);
  const before = (await events()).length;
  const many = await batch(Array.from({ length: 10 }, (_, i) => status(10 + i, own)));
  const answers = Object.values(many);
  expect(answers).toHaveLength(10);
  const limited = answers.filter((a) => a.structuredContent?.error === 'rate_limited');
  const read = answers.filter((a) => a.structuredContent?.status === 'working');
  expect(limited.length + read.length).toBe(10);
  // A fresh window gives at least its 3 points (more if the batch straddles two windows).
  expect(read.length).toBeGreaterThanOrEqual(3);
  expect(read.length).toBeLessThanOrEqual(3 * 2);
  const after = (await events()).slice(before);
  expect(after.filter((e) => e.type === 'task.status_read')).toHaveLength(read.length);
  expect(after.filter((e) => e.reason === 'rate_limited').length).toBeGreaterThanOrEqual(1);
});
