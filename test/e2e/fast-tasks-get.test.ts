// The gateway answers a conforming 2026-07-28 `tasks/get` itself (mcp/fast-tasks-get.ts)
// instead of through the SDK's per-request server, and so the 2025-11-25 `tasks/get`, the job
// tools' status and the 2025-11-25 `tasks/result` (mcp/fast-tasks-result.ts, an SSE stream).
// Same requests, both ways, on the same tasks: the answers (HTTP status, content type, JSON-RPC
// body, each event of a stream) and the audit events they write must be identical; requests
// the fast path does not take still reach the SDK.
import type { Request } from 'express';
import { coreTasksGet, plainTasksGet } from '../../apps/gateway/src/mcp/fast-tasks-get.ts';
import { coreJobStatus } from '../../apps/gateway/src/mcp/fast-job-status.ts';
import { coreTasksResult } from '../../apps/gateway/src/mcp/fast-tasks-result.ts';
import { pollUntil } from '../support/poll.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { auditCounts, countsDelta } from '../support/audit-counts.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';

const EXT = 'io.modelcontextprotocol/tasks';
let stack: Stack;
let alice: string;
let bob: string;
const ids: Record<string, string> = {};

beforeAll(async () => {
  stack = await startStack({
    workers: 1,
    env: {
      TOOL_LIMITS: JSON.stringify({ bulk_update_records: { deleteResultOnRead: true } }),
      // Both paths must write the same events for each read: every read is one here (under
      // the default, the first path's reads would leave the second's nothing to record).
      STATUS_READ_AUDIT: 'all',
      // A tasks/result of a running task waits this long, both ways, then says so.
      TASK_RESULT_WAIT_MS: '1000',
    },
  });
  alice = await stack.token('alice', 'acme');
  bob = await stack.token('bob', 'acme');
  const start = async (report: string) =>
    (
      await rpc2026(
        stack.mcpUrl,
        alice,
        'tools/call',
        { name: 'generate_report', arguments: { report, rows: 1 } },
        { tasksExtension: true },
      )
    ).body.result.taskId as string;
  ids.completed = await start('done');
  ids.gone = (
    await rpc2026(
      stack.mcpUrl,
      alice,
      'tools/call',
      { name: 'bulk_update_records', arguments: { collection: 'once', count: 1, patch: { a: 1 } } },
      { tasksExtension: true },
    )
  ).body.result.taskId as string;
  for (const id of [ids.completed, ids.gone])
    await pollUntil(
      async () => (await sql(stack.db.url, 'SELECT status FROM app.tasks WHERE id = $1', [id]))[0],
      (r) => r?.status === 'completed',
    );
  // Its result is deleted on this first read: both paths then see a completed task without it.
  await rpc2026(stack.mcpUrl, alice, 'tasks/get', { taskId: ids.gone }, { tasksExtension: true });
  // With no worker left, new tasks stay `working` (queued) and unchanged while we compare.
  for (const w of stack.workers) await w.stop();
  ids.working = await start('queued');
  ids.cancelled = await start('to-cancel');
  await rpc2026(
    stack.mcpUrl,
    alice,
    'tasks/cancel',
    { taskId: ids.cancelled },
    {
      tasksExtension: true,
    },
  );
}, 60_000);
afterAll(async () => {
  await stack?.close();
});

interface Case {
  name: string;
  /**
   * 2025-11-25 as the v1 SDK sends it (mcp/fast-tasks-get.ts coreTasksGet); `job`: the job
   * tools' get_job_status on that wire (mcp/fast-job-status.ts); else 2026.
   */
  wire?: '2025' | 'job' | 'result';
  /** 2025 and job only: params beside taskId (beside name and arguments for a job). */
  params?: Record<string, unknown>;
  /** job only: the tool's arguments, in place of { jobId } (read when the case runs). */
  args?: () => Record<string, unknown>;
  fast: boolean;
  token: () => string;
  id: unknown;
  taskId: () => unknown;
  ext?: boolean;
  headers?: (taskId: unknown) => Record<string, string>;
}

const standard = (taskId: unknown) => ({
  'mcp-protocol-version': '2026-07-28',
  'mcp-method': 'tasks/get',
  'mcp-name': String(taskId),
});
const CASES: Case[] = [
  { name: 'working task', fast: true, token: () => alice, id: 1, taskId: () => ids.working },
  { name: 'string id', fast: true, token: () => alice, id: 'req-1', taskId: () => ids.working },
  {
    name: 'completed task (result inline)',
    fast: true,
    token: () => alice,
    id: 2,
    taskId: () => ids.completed,
  },
  { name: 'cancelled task', fast: true, token: () => alice, id: 3, taskId: () => ids.cancelled },
  {
    name: 'completed task whose result is gone',
    fast: true,
    token: () => alice,
    id: 12,
    taskId: () => ids.gone,
  },
  { name: 'unknown task', fast: true, token: () => alice, id: 4, taskId: () => 'a'.repeat(32) },
  { name: "another user's task", fast: true, token: () => bob, id: 5, taskId: () => ids.working },
  { name: 'malformed task id', fast: true, token: () => alice, id: 6, taskId: () => 'nope' },
  {
    name: 'extension not declared',
    fast: false,
    token: () => alice,
    id: 7,
    taskId: () => ids.working,
    ext: false,
  },
  { name: 'taskId not a string', fast: false, token: () => alice, id: 8, taskId: () => 42 },
  {
    name: 'Mcp-Name disagrees',
    fast: false,
    token: () => alice,
    id: 9,
    taskId: () => ids.working,
    headers: (t) => ({ ...standard(t), 'mcp-name': 'other' }),
  },
  {
    name: 'no MCP headers',
    fast: false,
    token: () => alice,
    id: 10,
    taskId: () => ids.working,
    headers: () => ({}),
  },
  {
    name: 'Accept: application/json only',
    fast: true,
    token: () => alice,
    id: 11,
    taskId: () => ids.working,
    headers: (t) => ({ ...standard(t), accept: 'application/json' }),
  },
];

const core = (_taskId: unknown) => ({ 'mcp-protocol-version': '2025-11-25' });
const CASES_2025: Case[] = [
  { name: '2025: working task', fast: true, token: () => alice, id: 21, taskId: () => ids.working },
  {
    name: '2025: string id',
    fast: true,
    token: () => alice,
    id: 'r-22',
    taskId: () => ids.working,
  },
  {
    name: '2025: completed task',
    fast: true,
    token: () => alice,
    id: 23,
    taskId: () => ids.completed,
  },
  {
    name: '2025: cancelled task',
    fast: true,
    token: () => alice,
    id: 24,
    taskId: () => ids.cancelled,
  },
  {
    name: '2025: unknown task',
    fast: true,
    token: () => alice,
    id: 25,
    taskId: () => 'b'.repeat(32),
  },
  {
    name: "2025: another user's task",
    fast: true,
    token: () => bob,
    id: 26,
    taskId: () => ids.working,
  },
  { name: '2025: malformed task id', fast: true, token: () => alice, id: 27, taskId: () => 'nope' },
  { name: '2025: taskId not a string', fast: false, token: () => alice, id: 28, taskId: () => 42 },
  {
    name: '2025: _meta beside taskId',
    fast: false,
    token: () => alice,
    id: 29,
    taskId: () => ids.working,
    params: { _meta: { progressToken: 'p' } },
  },
  {
    name: '2025: Accept: application/json only (the v1 transport refuses it)',
    fast: false,
    token: () => alice,
    id: 30,
    taskId: () => ids.working,
    headers: () => ({ ...core(0), accept: 'application/json' }),
  },
  {
    name: '2025: an older revision',
    fast: false,
    token: () => alice,
    id: 31,
    taskId: () => ids.working,
    headers: () => ({ 'mcp-protocol-version': '2025-06-18' }),
  },
  {
    name: '2025: a session id',
    fast: false,
    token: () => alice,
    id: 32,
    taskId: () => ids.working,
    headers: () => ({ ...core(0), 'mcp-session-id': 'abc' }),
  },
].map((c) => ({ ...c, wire: '2025' as const }));
const CASES_JOB: Case[] = [
  { name: 'job: working', fast: true, token: () => alice, id: 41, taskId: () => ids.working },
  { name: 'job: string id', fast: true, token: () => alice, id: 'j-42', taskId: () => ids.working },
  { name: 'job: completed', fast: true, token: () => alice, id: 43, taskId: () => ids.completed },
  { name: 'job: cancelled', fast: true, token: () => alice, id: 44, taskId: () => ids.cancelled },
  { name: 'job: unknown', fast: true, token: () => alice, id: 45, taskId: () => 'c'.repeat(32) },
  { name: "job: another user's", fast: true, token: () => bob, id: 46, taskId: () => ids.working },
  { name: 'job: malformed id', fast: true, token: () => alice, id: 47, taskId: () => 'nope' },
  {
    name: 'job: an empty jobId (the tool refuses it)',
    fast: true,
    token: () => alice,
    id: 48,
    taskId: () => '',
  },
  { name: 'job: jobId not a string', fast: false, token: () => alice, id: 49, taskId: () => 7 },
  {
    name: 'job: an argument beside jobId',
    fast: false,
    token: () => alice,
    id: 50,
    taskId: () => ids.working,
    args: () => ({ jobId: ids.working, extra: 1 }),
  },
  {
    name: 'job: _meta beside name and arguments',
    fast: false,
    token: () => alice,
    id: 51,
    taskId: () => ids.working,
    params: { _meta: { progressToken: 'p' } },
  },
  {
    name: 'job: an older revision',
    fast: false,
    token: () => alice,
    id: 52,
    taskId: () => ids.working,
    headers: () => ({ 'mcp-protocol-version': '2025-06-18' }),
  },
].map((c) => ({ ...c, wire: 'job' as const }));
const CASES_RESULT: Case[] = [
  {
    name: 'result: completed',
    fast: true,
    token: () => alice,
    id: 61,
    taskId: () => ids.completed,
  },
  {
    name: 'result: as callToolStream asks (its task options, a progress token)',
    fast: true,
    token: () => alice,
    id: 'r-62',
    taskId: () => ids.completed,
    params: { task: {}, _meta: { progressToken: 7 } },
  },
  {
    name: 'result: cancelled',
    fast: true,
    token: () => alice,
    id: 63,
    taskId: () => ids.cancelled,
  },
  { name: 'result: gone', fast: true, token: () => alice, id: 64, taskId: () => ids.gone },
  {
    name: 'result: running (the wait runs out)',
    fast: true,
    token: () => alice,
    id: 65,
    taskId: () => ids.working,
  },
  { name: 'result: unknown', fast: true, token: () => alice, id: 66, taskId: () => 'd'.repeat(32) },
  {
    name: "result: another user's",
    fast: true,
    token: () => bob,
    id: 67,
    taskId: () => ids.working,
  },
  { name: 'result: malformed id', fast: true, token: () => alice, id: 68, taskId: () => 'nope' },
  { name: 'result: taskId not a string', fast: false, token: () => alice, id: 69, taskId: () => 9 },
  {
    name: 'result: a related task in _meta',
    fast: false,
    token: () => alice,
    id: 70,
    taskId: () => ids.completed,
    params: { _meta: { 'io.modelcontextprotocol/related-task': { taskId: 'x' } } },
  },
  {
    name: 'result: a progress token the SDK refuses (an object)',
    fast: false,
    token: () => alice,
    id: 73,
    taskId: () => ids.completed,
    params: { _meta: { progressToken: { a: 1 } } },
  },
  {
    name: 'result: a param of its own',
    fast: false,
    token: () => alice,
    id: 71,
    taskId: () => ids.completed,
    params: { cursor: 'c' },
  },
  {
    name: 'result: a session id',
    fast: false,
    token: () => alice,
    id: 72,
    taskId: () => ids.completed,
    headers: () => ({ ...core(0), 'mcp-session-id': 'abc' }),
  },
].map((c) => ({ ...c, wire: 'result' as const }));
const ALL = [...CASES, ...CASES_2025, ...CASES_JOB, ...CASES_RESULT];

function requestOf(c: Case) {
  const taskId = c.taskId();
  if (c.wire === 'job') {
    return {
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(c.headers ?? core)(taskId),
      },
      body: {
        jsonrpc: '2.0',
        id: c.id,
        method: 'tools/call',
        params: { name: 'get_job_status', arguments: c.args?.() ?? { jobId: taskId }, ...c.params },
      },
    };
  }
  if (c.wire === '2025' || c.wire === 'result') {
    const method = c.wire === 'result' ? 'tasks/result' : 'tasks/get';
    return {
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(c.headers ?? core)(taskId),
      },
      body: { jsonrpc: '2.0', id: c.id, method, params: { taskId, ...c.params } },
    };
  }
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    ...(c.headers ?? standard)(taskId),
  };
  const body = {
    jsonrpc: '2.0',
    id: c.id,
    method: 'tasks/get',
    params: {
      taskId,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientInfo': { name: 'fast-path-test', version: '1' },
        'io.modelcontextprotocol/clientCapabilities':
          c.ext === false ? {} : { extensions: { [EXT]: {} } },
      },
    },
  };
  return { headers, body };
}

async function send(c: Case) {
  const { headers, body } = requestOf(c);
  const r = await fetch(stack.mcpUrl, {
    method: 'POST',
    headers: { authorization: `Bearer ${c.token()}`, ...headers },
    body: JSON.stringify(body),
  });
  const contentType = r.headers.get('content-type');
  const text = await r.text();
  return {
    status: r.status,
    contentType,
    // A stream: each event's kind and message, in order.
    body: contentType?.startsWith('text/event-stream')
      ? text
          .split('\n\n')
          .filter((e) => e.trim())
          .map((e) =>
            e.split('\n').map((l) => (l.startsWith('data: ') ? JSON.parse(l.slice(6)) : l)),
          )
      : (JSON.parse(text) as unknown),
  };
}

/** The events whose counts each request's answer is compared by. */
const AUDITED = ['task.status_read', 'task.result_read', 'task.denied'];

async function runAll() {
  const answers = [];
  const audits = [];
  for (const c of ALL) {
    const before = await auditCounts(stack.db.url, AUDITED);
    answers.push(await send(c));
    audits.push(countsDelta(await auditCounts(stack.db.url, AUDITED), before));
  }
  return { answers, audits };
}

test('the fast path takes exactly the conforming requests', () => {
  for (const c of ALL) {
    const { headers, body } = requestOf(c);
    const r = { body, headers } as unknown as Request;
    const taken =
      c.wire === 'job'
        ? coreJobStatus(r)
        : c.wire === '2025'
          ? coreTasksGet(r)
          : c.wire === 'result'
            ? coreTasksResult(r)
            : plainTasksGet(r);
    expect({ name: c.name, taken: taken !== undefined }).toEqual({ name: c.name, taken: c.fast });
  }
});

test('answers and audit events are the same with and without the fast path', async () => {
  const fast = await runAll();
  stack.env.TASKS_GET_FAST_PATH = 'off';
  await stack.restartGateway();
  try {
    const sdk = await runAll();
    ALL.forEach((c, i) => {
      expect({ case: c.name, ...fast.answers[i] }).toEqual({ case: c.name, ...sdk.answers[i] });
      expect({ case: c.name, audit: fast.audits[i] }).toEqual({
        case: c.name,
        audit: sdk.audits[i],
      });
    });
    // The cases really cover answers and denials.
    expect(fast.answers[0]).toMatchObject({
      status: 200,
      body: { result: { status: 'working', taskId: ids.working } },
    });
    expect(fast.answers[2]).toMatchObject({
      body: { result: { status: 'completed', result: { resultType: 'complete' } } },
    });
    expect(fast.answers[4]).toMatchObject({
      body: { result: { status: 'completed', result: { isError: true } } },
    });
    expect(fast.audits[4]).toEqual({ 'task.status_read/': 1, 'task.denied/result_gone': 1 });
    expect(fast.answers[6]).toMatchObject({ body: { error: { code: -32602 } } });
    expect(fast.audits[6]).toEqual({ 'task.denied/other_subject': 1 });
    const at = (name: string) => ALL.findIndex((c) => c.name === name);
    expect(fast.answers[at('2025: working task')]).toMatchObject({
      status: 200,
      contentType: 'application/json',
      body: { jsonrpc: '2.0', id: 21, result: { status: 'working', taskId: ids.working } },
    });
    expect(fast.answers[at("2025: another user's task")]).toMatchObject({
      body: { error: { code: -32602 } },
    });
    // (Its denial folds into the 2026 case's: the same caller and task moments before.)
    expect(
      fast.answers[at('2025: Accept: application/json only (the v1 transport refuses it)')],
    ).toMatchObject({ status: 406 });
    expect(fast.answers[at('job: working')]).toMatchObject({
      status: 200,
      contentType: 'application/json',
      body: {
        id: 41,
        result: { structuredContent: { jobId: ids.working, status: 'working' } },
      },
    });
    expect(fast.answers[at("job: another user's")]).toMatchObject({
      body: { result: { isError: true, structuredContent: { error: 'task_not_found' } } },
    });
    expect(fast.answers[at('job: an empty jobId (the tool refuses it)')]).toMatchObject({
      body: { result: { isError: true } },
    });
    const rpcOf = (name: string) => {
      const a = fast.answers[at(name)]!;
      expect(a).toMatchObject({ status: 200, contentType: 'text/event-stream' });
      const events = a.body as unknown[][];
      expect(events).toHaveLength(1);
      expect(events[0]![0]).toBe('event: message');
      return events[0]![1];
    };
    expect(rpcOf('result: completed')).toMatchObject({
      jsonrpc: '2.0',
      id: 61,
      result: {
        structuredContent: expect.any(Object),
        _meta: { 'io.modelcontextprotocol/related-task': { taskId: ids.completed } },
      },
    });
    expect(fast.audits[at('result: completed')]).toEqual({ 'task.result_read/': 1 });
    expect(rpcOf('result: cancelled')).toMatchObject({
      error: { code: -32603, data: { status: 'cancelled' } },
    });
    expect(rpcOf('result: running (the wait runs out)')).toMatchObject({
      error: { code: -32603, message: expect.stringMatching(/still running after 1000 ms/) },
    });
    expect(rpcOf("result: another user's")).toMatchObject({ error: { code: -32602 } });
    expect(fast.audits[at('result: gone')]).toEqual({ 'task.denied/result_gone': 1 });
  } finally {
    stack.env.TASKS_GET_FAST_PATH = 'on';
    await stack.restartGateway();
  }
});
