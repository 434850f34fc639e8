// The gateway answers a conforming 2026-07-28 `tasks/get` itself (mcp/fast-tasks-get.ts)
// instead of through the SDK's per-request server. Same requests, both ways, on the same
// tasks: the answers (HTTP status, content type, JSON-RPC body) and the audit events they
// write must be identical; requests the fast path does not take still reach the SDK.
import type { Request } from 'express';
import { plainTasksGet } from '../../apps/gateway/src/mcp/fast-tasks-get.ts';
import { pollUntil } from '../support/poll.ts';
import { rpc2026 } from '../support/raw-2026.ts';
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

function requestOf(c: Case) {
  const taskId = c.taskId();
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
  return {
    status: r.status,
    contentType: r.headers.get('content-type'),
    body: JSON.parse(await r.text()) as unknown,
  };
}

async function auditCounts(): Promise<Record<string, number>> {
  const rows = await sql<{ type: string; reason: string | null; n: number }>(
    stack.db.url,
    `SELECT type, reason, count(*)::int AS n FROM audit.events
      WHERE type IN ('task.status_read', 'task.result_read', 'task.denied') GROUP BY 1, 2`,
  );
  return Object.fromEntries(rows.map((r) => [`${r.type}/${r.reason ?? ''}`, r.n]));
}

function delta(after: Record<string, number>, before: Record<string, number>) {
  return Object.fromEntries(
    Object.keys(after)
      .map((k) => [k, after[k]! - (before[k] ?? 0)] as const)
      .filter(([, n]) => n !== 0),
  );
}

async function runAll() {
  const answers = [];
  const audits = [];
  for (const c of CASES) {
    const before = await auditCounts();
    answers.push(await send(c));
    audits.push(delta(await auditCounts(), before));
  }
  return { answers, audits };
}

test('the fast path takes exactly the conforming requests', () => {
  for (const c of CASES) {
    const { headers, body } = requestOf(c);
    const taken = plainTasksGet({ body, headers } as unknown as Request);
    expect({ name: c.name, taken: taken !== undefined }).toEqual({ name: c.name, taken: c.fast });
  }
});

test('answers and audit events are the same with and without the fast path', async () => {
  const fast = await runAll();
  stack.env.TASKS_GET_FAST_PATH = 'off';
  await stack.restartGateway();
  try {
    const sdk = await runAll();
    CASES.forEach((c, i) => {
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
  } finally {
    stack.env.TASKS_GET_FAST_PATH = 'on';
    await stack.restartGateway();
  }
});
