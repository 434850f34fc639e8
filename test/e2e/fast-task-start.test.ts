// The gateway starts a long tool as a task itself (mcp/fast-task-start.ts), on the 2026-07-28
// wire (tasks extension) and the 2025-11-25 wire (a task-augmented call as the v1 SDK sends
// it), instead of through the SDKs' per-request servers. Same requests, both ways: the
// answers (HTTP status, content type, JSON-RPC body, with each new task's id and times
// masked) and the audit events they write must be identical; requests the fast path does not
// take still reach the SDKs.
import type { Request } from 'express';
import { coreTaskStart, plainTaskStart } from '../../apps/gateway/src/mcp/fast-task-start.ts';
import { auditCounts, countsDelta } from '../support/audit-counts.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';

const EXT = 'io.modelcontextprotocol/tasks';
const KEY = 'io.mcp-task-gateway/idempotency-key';
const LONG = new Set(['bulk_update_records', 'generate_report', 'provision_test_environment']);
let stack: Stack;
let alice: string;

beforeAll(async () => {
  // No worker: every task started stays queued and unchanged while the answers are compared.
  stack = await startStack({ workers: 0 });
  alice = await stack.token('alice', 'acme');
}, 60_000);
afterAll(async () => {
  await stack?.close();
});

interface Case {
  name: string;
  wire: '2026' | '2025';
  fast: boolean;
  /** The params; `run` tells the two passes apart where a start must be new in each. */
  params: (run: string) => Record<string, unknown>;
  /** 2026: declare the tasks extension (default true). */
  ext?: boolean;
  headers?: Record<string, string>;
}

const bulk = (run: string, extra: Record<string, unknown> = {}) => ({
  name: 'bulk_update_records',
  arguments: { collection: `fast-${run}`, count: 10, patch: { a: 1 }, ...extra },
});

const CASES: Case[] = [
  { name: 'a start', wire: '2026', fast: true, params: (run) => bulk(run) },
  {
    name: 'a start with an idempotency key and a deadline',
    wire: '2026',
    fast: true,
    params: (run) => ({
      ...bulk(run, { patch: { b: 2 } }),
      _meta: { [KEY]: `k-${run}`, 'io.mcp-task-gateway/deadline-ms': 60_000 },
    }),
  },
  {
    name: 'the same key again (deduplicated)',
    wire: '2026',
    fast: true,
    params: (run) => ({ ...bulk(run, { patch: { b: 2 } }), _meta: { [KEY]: `k-${run}` } }),
  },
  {
    name: 'an idempotency key too long',
    wire: '2026',
    fast: true,
    params: (run) => ({ ...bulk(run), _meta: { [KEY]: 'x'.repeat(201) } }),
  },
  {
    name: 'invalid arguments',
    wire: '2026',
    fast: true,
    params: () => ({ name: 'bulk_update_records', arguments: { count: 'many' } }),
  },
  {
    name: 'no arguments',
    wire: '2026',
    fast: true,
    params: () => ({ name: 'generate_report' }),
  },
  {
    name: 'extension not declared',
    wire: '2026',
    fast: false,
    ext: false,
    params: (run) => bulk(`${run}-plain`),
  },
  { name: 'an instant tool', wire: '2026', fast: false, params: () => ({ name: 'whoami' }) },
  {
    name: 'an unknown tool',
    wire: '2026',
    fast: false,
    params: () => ({ name: 'no_such_tool', arguments: {} }),
  },
  {
    name: 'arguments not an object',
    wire: '2026',
    fast: false,
    params: () => ({ name: 'bulk_update_records', arguments: [1] }),
  },
  {
    name: 'Mcp-Name disagrees',
    wire: '2026',
    fast: false,
    params: (run) => bulk(`${run}-name`),
    headers: { 'mcp-name': 'generate_report' },
  },
  {
    name: '2025: a start',
    wire: '2025',
    fast: true,
    params: (run) => ({ ...bulk(run, { patch: { c: 1 } }), task: {} }),
  },
  {
    name: '2025: a start with a ttl and a progress token',
    wire: '2025',
    fast: true,
    params: (run) => ({
      ...bulk(run, { patch: { c: 2 } }),
      task: { ttl: 120_000 },
      _meta: { progressToken: 7 },
    }),
  },
  {
    name: '2025: invalid arguments',
    wire: '2025',
    fast: true,
    params: () => ({ name: 'bulk_update_records', arguments: { count: -1 }, task: {} }),
  },
  {
    name: '2025: a plain call (no task)',
    wire: '2025',
    fast: false,
    params: (run) => bulk(`${run}-plain25`),
  },
  {
    name: '2025: a ttl of zero',
    wire: '2025',
    fast: false,
    params: (run) => ({ ...bulk(run, { patch: { c: 3 } }), task: { ttl: 0 } }),
  },
  {
    name: '2025: an instant tool as a task',
    wire: '2025',
    fast: false,
    params: () => ({ name: 'whoami', task: {} }),
  },
  {
    name: '2025: an idempotency key in _meta',
    wire: '2025',
    fast: false,
    params: (run) => ({
      ...bulk(run, { patch: { c: 4 } }),
      task: {},
      _meta: { [KEY]: `k25-${run}` },
    }),
  },
  {
    name: '2025: an older revision',
    wire: '2025',
    fast: false,
    params: (run) => ({ ...bulk(run, { patch: { c: 5 } }), task: {} }),
    headers: { 'mcp-protocol-version': '2025-06-18' },
  },
];

function requestOf(c: Case, run: string) {
  const params = c.params(run);
  if (c.wire === '2025') {
    return {
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
        ...c.headers,
      },
      body: { jsonrpc: '2.0', id: 7, method: 'tools/call', params },
    };
  }
  return {
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': String(params.name),
      ...c.headers,
    },
    body: {
      jsonrpc: '2.0',
      id: 'start-1',
      method: 'tools/call',
      params: {
        ...params,
        _meta: {
          ...(params._meta as object | undefined),
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'fast-start-test', version: '1' },
          'io.modelcontextprotocol/clientCapabilities':
            c.ext === false ? {} : { extensions: { [EXT]: {} } },
        },
      },
    },
  };
}

/** A new task's id and times differ between the passes; everything else must not. */
const mask = (text: string) =>
  text
    .replace(/\b[0-9a-f]{32}\b/g, '<id>')
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>');

async function send(c: Case, run: string) {
  const { headers, body } = requestOf(c, run);
  const r = await fetch(stack.mcpUrl, {
    method: 'POST',
    headers: { authorization: `Bearer ${alice}`, ...headers },
    body: JSON.stringify(body),
  });
  const text = await r.text();
  return {
    status: r.status,
    contentType: r.headers.get('content-type'),
    body: JSON.parse(mask(text)) as unknown,
    taskId: /"taskId":"([0-9a-f]{32})"/.exec(text)?.[1],
  };
}

/** The events whose counts each request's answer is compared by. */
const AUDITED = ['task.%', 'tool.%'];

async function runAll(run: string) {
  const answers = [];
  const audits = [];
  const rows = [];
  for (const c of CASES) {
    const before = await auditCounts(stack.db.url, AUDITED);
    const answer = await send(c, run);
    audits.push(countsDelta(await auditCounts(stack.db.url, AUDITED), before));
    const { taskId, ...shown } = answer;
    answers.push(shown);
    // The task row a start made, as the wire and mode recorded it.
    rows.push(
      taskId
        ? (
            await sql<{ tool: string; ttl_ms: number; progress: boolean; wire: string }>(
              stack.db.url,
              `SELECT t.tool, t.ttl_ms, e.body::jsonb -> 'data' ->> 'wire' AS wire,
                      EXISTS (SELECT 1 FROM app.task_progress_tokens p WHERE p.task_id = t.id)
                        AS progress
                 FROM app.tasks t
                 JOIN audit.events e ON e.task_id = t.id AND e.type = 'task.created'
                WHERE t.id = $1`,
              [taskId],
            )
          )[0]
        : undefined,
    );
  }
  return { answers, audits, rows };
}

test('the fast path takes exactly the conforming starts of long tools', () => {
  for (const c of CASES) {
    const { headers, body } = requestOf(c, 'classify');
    const r = { body, headers } as unknown as Request;
    const isLong = (name: string) => LONG.has(name);
    const taken = c.wire === '2025' ? coreTaskStart(r, isLong) : plainTaskStart(r, isLong);
    expect({ name: c.name, taken: taken !== undefined }).toEqual({ name: c.name, taken: c.fast });
  }
});

test('answers, task rows and audit events are the same with and without the fast path', async () => {
  const fast = await runAll('fast');
  stack.env.TASKS_GET_FAST_PATH = 'off';
  await stack.restartGateway();
  try {
    const sdk = await runAll('sdk');
    CASES.forEach((c, i) => {
      expect({ case: c.name, ...fast.answers[i] }).toEqual({ case: c.name, ...sdk.answers[i] });
      expect({ case: c.name, audit: fast.audits[i] }).toEqual({
        case: c.name,
        audit: sdk.audits[i],
      });
      expect({ case: c.name, row: fast.rows[i] }).toEqual({ case: c.name, row: sdk.rows[i] });
    });
    // The cases really cover starts, deduplication and refusals on both wires.
    const at = (name: string) => CASES.findIndex((c) => c.name === name);
    expect(fast.answers[at('a start')]).toMatchObject({
      status: 200,
      contentType: 'application/json',
      body: { id: 'start-1', result: { resultType: 'task', taskId: '<id>', status: 'working' } },
    });
    expect(fast.audits[at('a start')]).toEqual({ 'task.created/': 1, 'task.delegated/': 1 });
    expect(fast.rows[at('a start')]).toMatchObject({ wire: 'ext-2026' });
    expect(fast.audits[at('the same key again (deduplicated)')]).toEqual({
      'task.deduplicated/': 1,
    });
    expect(fast.answers[at('an idempotency key too long')]).toMatchObject({
      body: { error: { code: -32602, data: { reason: 'invalid_idempotency_key' } } },
    });
    expect(fast.answers[at('invalid arguments')]).toMatchObject({
      body: { result: { isError: true } },
    });
    expect(fast.answers[at('2025: a start')]).toMatchObject({
      status: 200,
      contentType: 'application/json',
      body: { id: 7, result: { task: { taskId: '<id>', status: 'working' } } },
    });
    expect(fast.rows[at('2025: a start with a ttl and a progress token')]).toMatchObject({
      ttl_ms: 120_000,
      progress: true,
      wire: 'core-2025',
    });
    expect(fast.answers[at('2025: invalid arguments')]).toMatchObject({
      body: { error: { code: -32602 } },
    });
  } finally {
    stack.env.TASKS_GET_FAST_PATH = 'on';
    await stack.restartGateway();
  }
});
