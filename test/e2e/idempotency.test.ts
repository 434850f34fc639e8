// Explicit and derived idempotency keys at the edges: a key past its task's retention, and a
// key a client gave that the gateway cannot use.
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire } from '../support/wires.ts';

const KEY = 'io.mcp-task-gateway/idempotency-key';
let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    workers: 1,
    // Retention far shorter than the derived key's dedupe window (10 minutes by default).
    env: { TOOL_LIMITS: JSON.stringify({ generate_report: { retentionMs: 1500 } }) },
  });
});
afterAll(async () => {
  await stack?.close();
});

const tasksOf = async (subject: string) =>
  (
    await sql<{ n: number }>(
      stack.db.url,
      'SELECT count(*)::int AS n FROM app.tasks WHERE subject = $1',
      [subject],
    )
  )[0]!.n;

describe('retention', () => {
  test('a repeat start after the earlier task passed its retention makes a new task, for a derived and an explicit key alike', async () => {
    const token = await stack.token('rita', 'acme');
    const wire = jobToolsWire(stack.mcpUrl);
    const client = await connectV1(stack.mcpUrl, token);
    const explicitStart = async () =>
      (
        (
          await client.callTool({
            name: 'generate_report',
            arguments: { report: 'explicit' },
            _meta: { [KEY]: 'nightly-7' },
          })
        ).structuredContent as { jobId: string }
      ).jobId;
    const derived = await wire.start(token, 'generate_report', { report: 'derived' });
    const explicit = await explicitStart();
    for (const id of [derived, explicit]) {
      const done = await pollUntil(
        () => wire.get(token, id),
        (a) => a.ok && a.value.status === 'completed',
      );
      expect(done).toMatchObject({ ok: true, value: { status: 'completed' } });
    }
    // No worker, no purge: the rows stay in the table past their retention.
    for (const w of stack.workers) await w.stop();
    for (const id of [derived, explicit]) {
      const gone = await pollUntil(
        () => wire.get(token, id),
        (a) => !a.ok,
        10_000,
      );
      expect(gone).toEqual({ ok: false, error: 'Task not found' });
    }
    expect(
      await sql(stack.db.url, 'SELECT id FROM app.tasks WHERE id = ANY($1)', [[derived, explicit]]),
    ).toHaveLength(2);

    const derivedAgain = await wire.start(token, 'generate_report', { report: 'derived' });
    const explicitAgain = await explicitStart();
    expect(derivedAgain).not.toBe(derived);
    expect(explicitAgain).not.toBe(explicit);
    // The new tasks are real: every verb answers for them.
    for (const id of [derivedAgain, explicitAgain])
      expect(await wire.get(token, id)).toMatchObject({ ok: true, value: { status: 'working' } });
    await client.close();
  });
});

describe('invalid explicit keys', () => {
  const INVALID: Array<[string, unknown]> = [
    ['201 characters', 'k'.repeat(201)],
    ['empty', ''],
    ['a number', 42],
    ['an object', { key: 'x' }],
    ['null', null],
  ];

  test.each(INVALID)(
    'a key that is %s is refused with -32602 naming the limit on every wire, and starts nothing',
    async (_name, key) => {
      const subject = `ik-${Math.random().toString(36).slice(2)}`;
      const token = await stack.token(subject, 'acme');
      const params = { name: 'generate_report', arguments: { report: 'k' }, _meta: { [KEY]: key } };
      const expected = {
        code: -32602,
        message: expect.stringMatching(
          /idempotency key .* must be a string of 1 to 200 characters/,
        ),
        data: { reason: 'invalid_idempotency_key', maxLength: 200 },
      };

      const client = await connectV1(stack.mcpUrl, token);
      // 2025, no task support (job handle), and 2025-11-25 core tasks.
      for (const [request, schema] of [
        [{ method: 'tools/call', params }, CallToolResultSchema],
        [{ method: 'tools/call', params: { ...params, task: {} } }, CreateTaskResultSchema],
      ] as const) {
        const error = await client.request(request as never, schema).then(
          (r) => r,
          (e: { code: number; message: string; data: unknown }) => ({
            code: e.code,
            message: e.message,
            data: e.data,
          }),
        );
        expect(error).toMatchObject(expected);
      }
      await client.close();
      // 2026-07-28, with and without the tasks extension.
      for (const tasksExtension of [true, false]) {
        const r = await rpc2026(stack.mcpUrl, token, 'tools/call', params, { tasksExtension });
        expect(r.body.error).toMatchObject(expected);
      }
      expect(await tasksOf(subject)).toBe(0);
    },
  );

  test.each([
    ['201 characters', 'h'.repeat(201)],
    ['empty', ''],
  ])('an Idempotency-Key header that is %s is refused with -32602 too', async (_name, header) => {
    const subject = `ih-${Math.random().toString(36).slice(2)}`;
    const token = await stack.token(subject, 'acme');
    const r = await rpc2026(
      stack.mcpUrl,
      token,
      'tools/call',
      { name: 'generate_report', arguments: { report: 'h' } },
      { tasksExtension: true, headers: { 'idempotency-key': header } },
    );
    expect(r.body.error).toMatchObject({
      code: -32602,
      message: expect.stringMatching(/Idempotency-Key header must be a string of 1 to 200/),
    });
    expect(await tasksOf(subject)).toBe(0);
  });

  test('a key of exactly 200 characters is used, and deduplicates', async () => {
    const token = await stack.token('ivy', 'acme');
    const key = 'x'.repeat(200);
    const start = (report: string) =>
      rpc2026(
        stack.mcpUrl,
        token,
        'tools/call',
        { name: 'generate_report', arguments: { report }, _meta: { [KEY]: key } },
        { tasksExtension: true },
      );
    const first = await start('same');
    const again = await start('same');
    expect(first.body.result?.taskId).toMatch(/^[0-9a-f]{32}$/);
    expect(again.body.result.taskId).toBe(first.body.result.taskId);
    // The same key for another call is a conflict, not a silent second task.
    expect((await start('other')).body.error.data).toMatchObject({
      reason: 'idempotency_conflict',
    });
  });
});
