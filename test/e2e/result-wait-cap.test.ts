// A blocking 2025-11-25 tasks/result may hold a connection for TASK_RESULT_WAIT_MS: one
// caller may hold only TASK_RESULT_WAITS_PER_CALLER of them at once. The wait is long (a
// minute, past the test's own timeout): the holds end because the test moves the gateway's
// clock past it, not because that much time passes.
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { mcpPost } from '../support/raw-post.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { coreWire } from '../support/wires.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    workers: 1,
    env: { TASK_RESULT_WAITS_PER_CALLER: '2', TASK_RESULT_WAIT_MS: '60000' },
  });
});
afterAll(async () => {
  await stack?.close();
});

/**
 * Until a blocking tasks/result holds each of `taskIds`: past the cap, the hold marks its
 * task to be notified of its ending (app.tasks.settle_watched) before it waits.
 */
const held = (...taskIds: string[]) =>
  pollUntil(
    () =>
      sql(
        stack.db.url,
        'SELECT count(*)::int AS n FROM app.tasks WHERE id = ANY($1) AND settle_watched',
        [taskIds],
      ),
    (r) => r[0]?.n === taskIds.length,
  );

type Outcome = { ok: true; value: any } | { ok: false; code: number; message: string; data: any };

test('past its cap of held blocking results a caller is refused at once with a clear -32000, audited once; others and ended tasks are unaffected', async () => {
  const token = await stack.token('holder', 'acme');
  const wire = coreWire(stack.mcpUrl);
  const done = await wire.start(token, 'generate_report', { report: 'done', rows: 1 });
  await pollUntil(
    async () => (await sql(stack.db.url, 'SELECT status FROM app.tasks WHERE id = $1', [done]))[0],
    (r) => r?.status === 'completed',
  );
  // No worker from here on: new tasks stay working, so their results block.
  for (const w of stack.workers) await w.stop();
  const running = await wire.start(token, 'generate_report', { report: 'running' });
  const running2 = await wire.start(token, 'generate_report', { report: 'running-2' });

  const client = await connectV1(stack.mcpUrl, token);
  const result = (taskId: string): Promise<Outcome> =>
    client
      .request({ method: 'tasks/result', params: { taskId } }, CallToolResultSchema, {
        timeout: 20_000,
      })
      .then(
        (value) => ({ ok: true as const, value }),
        (e: { code: number; message: string; data: unknown }) => ({
          ok: false as const,
          code: e.code,
          message: e.message,
          data: e.data,
        }),
      );
  const holds = [result(running), result(running2)];
  await held(running, running2);

  // The third and fourth are refused, naming the limit: answered while the clock stands
  // still, which a hold never is.
  for (let i = 0; i < 2; i++) {
    const third = await result(running);
    expect(third).toMatchObject({
      ok: false,
      code: -32000,
      message: expect.stringMatching(/Too many blocking tasks\/result calls .*\(limit 2\)/),
      data: { reason: 'result_wait_limit', retryAfterSeconds: expect.any(Number) },
    });
  }
  // An ended task's result needs no hold: it is answered even past the cap.
  expect(await result(done)).toMatchObject({ ok: true, value: { content: expect.any(Array) } });
  // Another caller has caps of its own.
  const other = await connectV1(stack.mcpUrl, await stack.token('other-holder', 'acme'));
  const otherRunning = await wire.start(
    await stack.token('other-holder', 'acme'),
    'generate_report',
    { report: 'theirs' },
  );
  const theirs = other
    .request({ method: 'tasks/result', params: { taskId: otherRunning } }, CallToolResultSchema)
    .catch((e: { message: string }) => e.message);

  // The held ones are still held; they wait their full time (by the gateway's clock) and say
  // the task is still running.
  await expect(Promise.race([...holds, Promise.resolve('holding')])).resolves.toBe('holding');
  await held(otherRunning);
  stack.clock.advance(60_000);
  for (const h of await Promise.all(holds))
    expect(h).toMatchObject({ ok: false, message: expect.stringMatching(/still running after/) });
  expect(await theirs).toMatch(/still running after/);
  // With the holds released, the caller may hold again.
  const running3 = await wire.start(token, 'generate_report', { report: 'running-3' });
  const again = result(running3);
  await held(running3);
  await expect(Promise.race([again, Promise.resolve('holding')])).resolves.toBe('holding');
  stack.clock.advance(60_000);
  await again;
  await client.close();
  await other.close();

  const denials = await sql(
    stack.db.url,
    `SELECT reason FROM audit.events WHERE subject = 'holder' AND type = 'task.denied'`,
  );
  expect(denials).toEqual([{ reason: 'result_wait_limit' }]);
}, 60_000);

test('a held tasks/result stream gets a keep-alive comment while it waits, as the SDK sends one', async () => {
  const token = await stack.token('keeper', 'acme');
  for (const w of stack.workers) await w.stop().catch(() => {});
  const running = await coreWire(stack.mcpUrl).start(token, 'generate_report', { report: 'kept' });
  const abort = new AbortController();
  // Raw, not postMcp: the stream is read as it comes.
  const r = await fetch(stack.mcpUrl, {
    ...mcpPost(
      token,
      { 'mcp-protocol-version': '2025-11-25' },
      { jsonrpc: '2.0', id: 1, method: 'tasks/result', params: { taskId: running } },
    ),
    signal: abort.signal,
  });
  expect(r.headers.get('content-type')).toBe('text/event-stream');
  // Nothing to say for 15 s but that the stream is alive (a proxy would cut an idle one).
  const reader = r.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while (!text.includes('\n\n')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  abort.abort();
  expect(text).toBe(': keepalive\n\n');
}, 30_000);
