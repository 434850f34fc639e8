import { pollUntil } from './poll.ts';
import {
  CallToolResultSchema,
  CancelTaskResultSchema,
  CreateTaskResultSchema,
  GetTaskResultSchema,
  ListTasksResultSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { connectV1 } from './clients.ts';
import { rpc2026 } from './raw-2026.ts';

/** What a verb answered, normalised across wires so denials can be compared exactly. */
export type Answer = { ok: true; value: any } | { ok: false; error: string };

export interface Wire {
  name: string;
  start(token: string, tool: string, args: Record<string, unknown>): Promise<string>;
  get(token: string, taskId: string): Promise<Answer>;
  result(token: string, taskId: string): Promise<Answer>;
  cancel(token: string, taskId: string): Promise<Answer>;
  /** Task ids the caller can list (the 2026 extension has no list: undefined). */
  list(token: string): Promise<string[] | undefined>;
}

/** Starts a task on `wire` and polls it until it is no longer working: its id, last answer. */
export async function runToEnd(
  wire: Wire,
  token: string,
  tool: string,
  args: Record<string, unknown>,
  timeoutMs = 30_000,
): Promise<{ id: string; answer: Answer }> {
  const id = await wire.start(token, tool, args);
  const answer = await pollUntil(
    () => wire.get(token, id),
    (a) => a.ok && (a.value as { status?: string }).status !== 'working',
    timeoutMs,
  );
  return { id, answer };
}

async function v1<T>(
  url: string,
  token: string,
  fn: (c: Awaited<ReturnType<typeof connectV1>>) => Promise<T>,
): Promise<T> {
  const client = await connectV1(url, token);
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}

const fromError = (e: any): Answer => ({
  ok: false,
  error: `${e.code}:${String(e.message).replace(/^MCP error -?\d+: /, '')}`,
});

export function coreWire(mcpUrl: string): Wire {
  const ask = (token: string, request: any, schema: any) =>
    v1(mcpUrl, token, (c) => c.request(request, schema)).then(
      (value): Answer => ({ ok: true, value }),
      fromError,
    );
  return {
    name: 'core tasks (2025-11-25)',
    start: async (token, name, args) =>
      (
        await v1(mcpUrl, token, (c) =>
          c.request(
            { method: 'tools/call', params: { name, arguments: args, task: {} } },
            CreateTaskResultSchema,
          ),
        )
      ).task.taskId,
    get: (t, id) => ask(t, { method: 'tasks/get', params: { taskId: id } }, GetTaskResultSchema),
    result: (t, id) =>
      ask(t, { method: 'tasks/result', params: { taskId: id } }, CallToolResultSchema),
    cancel: (t, id) =>
      ask(t, { method: 'tasks/cancel', params: { taskId: id } }, CancelTaskResultSchema),
    list: async (t) =>
      (
        await v1(mcpUrl, t, (c) =>
          c.request({ method: 'tasks/list', params: {} }, ListTasksResultSchema),
        )
      ).tasks.map((x) => x.taskId),
  };
}

export function extWire(mcpUrl: string): Wire {
  const ask = async (
    token: string,
    method: string,
    params: Record<string, unknown>,
  ): Promise<Answer> => {
    const r = await rpc2026(mcpUrl, token, method, params, { tasksExtension: true });
    if (r.body?.error) return { ok: false, error: `${r.body.error.code}:${r.body.error.message}` };
    return { ok: true, value: r.body.result };
  };
  return {
    name: 'tasks extension (2026-07-28)',
    start: async (token, name, args) => {
      const r = await rpc2026(
        mcpUrl,
        token,
        'tools/call',
        { name, arguments: args },
        { tasksExtension: true },
      );
      if (!r.body.result?.taskId) throw new Error(`start failed: ${JSON.stringify(r.body)}`);
      return r.body.result.taskId;
    },
    get: (t, id) => ask(t, 'tasks/get', { taskId: id }),
    result: (t, id) => ask(t, 'tasks/get', { taskId: id }),
    cancel: (t, id) => ask(t, 'tasks/cancel', { taskId: id }),
    list: async () => undefined,
  };
}

export function jobToolsWire(mcpUrl: string): Wire {
  const call = (token: string, name: string, args: Record<string, unknown>) =>
    v1(mcpUrl, token, (c) => c.callTool({ name, arguments: args })).then(
      (r): Answer =>
        r.isError
          ? { ok: false, error: (r.content as Array<{ text: string }>)[0]!.text }
          : { ok: true, value: r.structuredContent },
      fromError,
    );
  return {
    name: 'job tools (no task support)',
    start: async (token, name, args) => {
      const r = await v1(mcpUrl, token, (c) => c.callTool({ name, arguments: args }));
      const id = (r.structuredContent as { jobId?: string } | undefined)?.jobId;
      if (!id) throw new Error(`start failed: ${JSON.stringify(r)}`);
      return id;
    },
    get: (t, id) => call(t, 'get_job_status', { jobId: id }),
    result: (t, id) => call(t, 'get_job_result', { jobId: id }),
    cancel: (t, id) => call(t, 'cancel_job', { jobId: id }),
    list: async (t) => {
      const r = await v1(mcpUrl, t, (c) => c.callTool({ name: 'list_jobs', arguments: {} }));
      return (r.structuredContent as { jobs: Array<{ jobId: string }> }).jobs.map((j) => j.jobId);
    },
  };
}
