// A terminal task never changes status, on any wire, whatever became of its result and
// however tight the poll limit: a 2026 tasks/get of a completed task is one read of the task
// with its result (one authorization, one rate-limit point, one audit event: the retrieval,
// which names the status it showed).
import { CallToolResultSchema, GetTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';

let stack: Stack;
let token: string;
const ids: Record<string, string> = {};
const PATHS = ['on', 'off'] as const; // TASKS_GET_FAST_PATH: the gateway's own path, the SDK's

beforeAll(async () => {
  stack = await startStack({
    workers: 1,
    env: {
      RATE_LIMIT_POLLS_PER_SECOND: '1',
      // Every read counted (the default records a status once per caller:
      // status-read-audit.test.ts): a read that brings the result is still one event.
      STATUS_READ_AUDIT: 'all',
      TOOL_LIMITS: JSON.stringify({ bulk_update_records: { deleteResultOnRead: true } }),
    },
  });
  token = await stack.token('tess', 'acme');
  const start = async (name: string, args: Record<string, unknown>) => {
    const r = await rpc2026(
      stack.mcpUrl,
      token,
      'tools/call',
      { name, arguments: args },
      {
        tasksExtension: true,
      },
    );
    return r.body.result.taskId as string;
  };
  for (const path of PATHS) {
    ids[`kept-${path}`] = await start('generate_report', { report: `kept-${path}`, rows: 1 });
    ids[`once-${path}`] = await start('bulk_update_records', {
      collection: `once-${path}`,
      count: 1,
      patch: { seen: true },
    });
  }
  for (const id of Object.values(ids)) {
    const row = await pollUntil(
      async () => (await sql(stack.db.url, 'SELECT status FROM app.tasks WHERE id = $1', [id]))[0],
      (r) => r?.status === 'completed',
    );
    expect(row.status).toBe('completed');
  }
}, 60_000);
afterAll(async () => {
  await stack?.close();
});

/**
 * Past the current one-second poll window, so the next read has a fresh point: a window lasts
 * a second of the gateway's clock from its first poll, and the test moves that clock.
 */
const nextWindow = () => stack.clock.advance(1000);

const get2026 = (taskId: string) =>
  rpc2026(stack.mcpUrl, token, 'tasks/get', { taskId }, { tasksExtension: true });

async function auditSince(seq: number) {
  return sql<{ type: string; reason: string | null; status: string | null }>(
    stack.db.url,
    `SELECT type, reason, body::jsonb -> 'data' ->> 'status' AS status
       FROM audit.events WHERE seq > $1 AND subject = 'tess' ORDER BY seq`,
    [seq],
  );
}
const lastSeq = async () =>
  Number((await sql(stack.db.url, 'SELECT coalesce(max(seq), 0) AS s FROM audit.events'))[0].s);

let currentPath: (typeof PATHS)[number] = 'on';
async function onPath(path: (typeof PATHS)[number], run: () => Promise<void>) {
  if (currentPath !== path) {
    stack.env.TASKS_GET_FAST_PATH = path;
    await stack.restartGateway();
    currentPath = path;
  }
  await run();
}

describe.each(PATHS)('with TASKS_GET_FAST_PATH=%s', (path) => {
  test('one 2026 tasks/get of a completed task under a poll limit of 1/s answers completed with its result: one point, one audit event', async () => {
    await onPath(path, async () => {
      nextWindow();
      const before = await lastSeq();
      const r = await get2026(ids[`kept-${path}`]!);
      expect(r.status).toBe(200);
      expect(r.body.error).toBeUndefined();
      expect(r.body.result).toMatchObject({
        taskId: ids[`kept-${path}`],
        status: 'completed',
        result: { resultType: 'complete', content: expect.any(Array) },
      });
      expect(r.body.result.result.isError).toBeFalsy();
      expect(await auditSince(before)).toEqual([
        { type: 'task.result_read', reason: null, status: 'completed' },
      ]);
    });
  });

  test('a delete-on-read result is delivered once, and the task stays completed on every later read, on every wire', async () => {
    await onPath(path, async () => {
      const id = ids[`once-${path}`]!;
      nextWindow();
      const first = await get2026(id);
      expect(first.body.result).toMatchObject({
        status: 'completed',
        result: { structuredContent: { collection: `once-${path}`, updated: 1 } },
      });

      nextWindow();
      const before = await lastSeq();
      const second = await get2026(id);
      expect(second.body.result).toMatchObject({
        taskId: id,
        status: 'completed',
        result: {
          resultType: 'complete',
          isError: true,
          content: [{ type: 'text', text: expect.stringMatching(/no longer stored/) }],
        },
      });
      expect(second.body.result.error).toBeUndefined();
      // A read that finds the result gone is still a status read (its denial may fold).
      expect(await auditSince(before)).toEqual([
        { type: 'task.status_read', reason: null, status: 'completed' },
        { type: 'task.denied', reason: 'result_gone', status: null },
      ]);
      const [row] = await sql(stack.db.url, 'SELECT status FROM app.tasks WHERE id = $1', [id]);
      expect(row.status).toBe('completed');

      // The other wires agree: completed, and the result is said to be gone.
      const client = await connectV1(stack.mcpUrl, token);
      nextWindow();
      const core = await client.request(
        { method: 'tasks/get', params: { taskId: id } },
        GetTaskResultSchema,
      );
      expect(core.status).toBe('completed');
      nextWindow();
      const status = await client.callTool({ name: 'get_job_status', arguments: { jobId: id } });
      expect(status.structuredContent).toMatchObject({ jobId: id, status: 'completed' });
      nextWindow();
      const job = await client.callTool({ name: 'get_job_result', arguments: { jobId: id } });
      expect(job).toMatchObject({
        isError: true,
        structuredContent: { error: 'result_gone' },
      });
      nextWindow();
      const payload = await client
        .request({ method: 'tasks/result', params: { taskId: id } }, CallToolResultSchema)
        .then(
          () => undefined,
          (e: { code: number; message: string }) => e,
        );
      expect(payload).toMatchObject({
        code: -32602,
        message: expect.stringMatching(/no longer stored/),
      });
      await client.close();
    });
  });
});

test('get_job_result of a running job is one read: under a poll limit of 1/s it says the job is still working', async () => {
  for (const w of stack.workers) await w.stop();
  const r = await rpc2026(
    stack.mcpUrl,
    token,
    'tools/call',
    { name: 'generate_report', arguments: { report: 'still-running' } },
    { tasksExtension: true },
  );
  const id = r.body.result.taskId as string;
  const client = await connectV1(stack.mcpUrl, token);
  nextWindow();
  const job = await client.callTool({ name: 'get_job_result', arguments: { jobId: id } });
  expect(job.isError).toBeFalsy();
  expect(job.structuredContent).toMatchObject({ jobId: id, status: 'working' });
  expect((job.content as Array<{ text: string }>)[0]!.text).toMatch(/still working/);
  await client.close();
});
