// A 2025-11-25 task-augmented tools/call that carries a progress token gets the task's
// progress as notifications/progress with that token (the spec keeps it valid for the task's
// lifetime), on the stream of tasks/result: the v1 SDK's own `onprogress` fires for a long
// tool, with each value above the last, however many streams wait.
import type { Progress } from '@modelcontextprotocol/sdk/types.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectV1 } from '../support/clients.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ env: { DEMO_STEP_MS: '1200' } });
});
afterAll(async () => {
  await stack?.close();
});

test("the v1 SDK's onprogress fires for a long tool while its client waits on tasks/result", async () => {
  const token = await stack.token('pia', 'acme');
  const client = await connectV1(stack.mcpUrl, token);
  try {
    const seen: Progress[] = [];
    const created = await client.request(
      {
        method: 'tools/call',
        params: {
          name: 'bulk_update_records',
          arguments: { collection: 'progress', count: 2000, patch: { p: 1 } },
          task: {},
        },
      },
      CreateTaskResultSchema,
      { onprogress: (p) => void seen.push(p) },
    );
    const taskId = created.task.taskId;
    // Two streams wait on the result: each value still goes out once, never twice.
    const [result] = await Promise.all([
      client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema),
      client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema),
    ]);
    expect(result.isError).toBeFalsy();
    // Four batches of 500: several notifications, each above the last, with total and text.
    expect(seen.length).toBeGreaterThanOrEqual(2);
    for (let i = 1; i < seen.length; i++)
      expect(seen[i]!.progress).toBeGreaterThan(seen[i - 1]!.progress);
    for (const p of seen) {
      expect(p.total).toBe(4);
      expect(p.message).toEqual(expect.any(String));
    }
    const [row] = await sql(
      stack.db.url,
      'SELECT token, notified FROM app.task_progress_tokens WHERE task_id = $1',
      [taskId],
    );
    expect(row.notified).toBe(seen[seen.length - 1]!.progress);
  } finally {
    await client.close();
  }
}, 30_000);

test("a repeat of the call joins the live task with its own token: the repeat's caller gets the progress from then on", async () => {
  const token = await stack.token('pia', 'acme');
  const first = await connectV1(stack.mcpUrl, token);
  const second = await connectV1(stack.mcpUrl, token);
  try {
    const firstSeen: Progress[] = [];
    const secondSeen: Progress[] = [];
    const key = `rejoin-${Date.now()}`;
    const params = (client: typeof first, seen: Progress[]) =>
      client.request(
        {
          method: 'tools/call',
          params: {
            name: 'bulk_update_records',
            arguments: { collection: 'rejoined', count: 2000, patch: { p: 3 } },
            task: {},
            _meta: { 'io.mcp-task-gateway/idempotency-key': key },
          },
        },
        CreateTaskResultSchema,
        { onprogress: (p) => void seen.push(p) },
      );
    const a = await params(first, firstSeen);
    // Another request first: the repeat's request id, its progress token, differs.
    await second.listTools();
    const b = await params(second, secondSeen);
    expect(b.task.taskId).toBe(a.task.taskId);
    await second.experimental.tasks.getTaskResult(b.task.taskId, CallToolResultSchema);
    expect(secondSeen.length).toBeGreaterThanOrEqual(2);
    expect(firstSeen).toEqual([]);
  } finally {
    await first.close();
    await second.close();
  }
}, 30_000);

test('a call without a progress token gets no progress notifications (and no token is kept)', async () => {
  const token = await stack.token('pia', 'acme');
  const client = await connectV1(stack.mcpUrl, token);
  const errors: Error[] = [];
  client.onerror = (e) => void errors.push(e);
  try {
    const created = await client.request(
      {
        method: 'tools/call',
        params: {
          name: 'bulk_update_records',
          arguments: { collection: 'quiet', count: 1000, patch: { p: 2 } },
          task: {},
        },
      },
      CreateTaskResultSchema,
    );
    await client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema);
    expect(errors.filter((e) => /progress/.test(e.message))).toEqual([]);
    expect(
      await sql(stack.db.url, 'SELECT 1 FROM app.task_progress_tokens WHERE task_id = $1', [
        created.task.taskId,
      ]),
    ).toEqual([]);
  } finally {
    await client.close();
  }
}, 30_000);
