import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { planUpstreams } from '../support/upstreams.ts';
import { coreWire, extWire, jobToolsWire } from '../support/wires.ts';

// What a caller gets from an upstream tool through the gateway, on every client wire: the
// upstream tool's own result (instant, and as a task's result), and, for invalid arguments,
// the same answer our own tools give.
let stack: Stack;
let upstreams: Awaited<ReturnType<typeof planUpstreams>>;
let token: string;

beforeAll(async () => {
  upstreams = await planUpstreams({ demoStepMs: 100 });
  await upstreams.start();
  stack = await startStack({
    env: { UPSTREAMS_FILE: upstreams.file },
    onIssuer: (issuer) => upstreams.trust(issuer),
  });
  token = await stack.token('alice', 'acme');
}, 60_000);
afterAll(async () => {
  await stack?.close();
  await upstreams?.close();
});

/** One tools/call as a client of this wire sends it, raw; the JSON-RPC answer. */
type Call = (name: string, args: Record<string, unknown>) => Promise<any>;

async function rpc2025(version: string, body: Record<string, unknown>) {
  const r = await fetch(stack.mcpUrl, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': version,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, ...body }),
  });
  const text = await r.text();
  // A JSON answer, or one SSE event carrying it.
  const json = text.startsWith('{') ? text : text.split('\ndata: ')[1]!.split('\n')[0]!;
  return JSON.parse(json);
}

// `task`: the call asks for a task. On 2025-11-25 a task-augmented call answers
// CreateTaskResult or a JSON-RPC error, so invalid arguments are -32602 there; everywhere else
// they are a tool error (isError), as the 2025-11-25 spec has input validation errors.
const wires: Array<{ name: string; call: Call; task: boolean }> = [
  {
    name: '2025-03-26',
    task: false,
    call: (name, args) =>
      rpc2025('2025-03-26', { method: 'tools/call', params: { name, arguments: args } }),
  },
  {
    name: '2025-11-25',
    task: false,
    call: (name, args) =>
      rpc2025('2025-11-25', { method: 'tools/call', params: { name, arguments: args } }),
  },
  {
    name: '2025-11-25 with task',
    task: true,
    call: (name, args) =>
      rpc2025('2025-11-25', {
        method: 'tools/call',
        params: { name, arguments: args, task: {} },
      }),
  },
  {
    name: '2026-07-28',
    task: false,
    call: async (name, args) =>
      (await rpc2026(stack.mcpUrl, token, 'tools/call', { name, arguments: args })).body,
  },
  {
    name: '2026-07-28 with the tasks extension',
    task: true,
    call: async (name, args) =>
      (
        await rpc2026(
          stack.mcpUrl,
          token,
          'tools/call',
          { name, arguments: args },
          {
            tasksExtension: true,
          },
        )
      ).body,
  },
];

/** An answer reduced to what a client acts on: a JSON-RPC error's code, or a tool result. */
function shapeOf(answer: any) {
  if (answer.error) return { error: answer.error.code };
  const r = answer.result;
  return {
    isError: r.isError === true,
    text: String(r.content?.[0]?.text ?? '').replace(/:.*/s, ''),
    structured: r.structuredContent !== undefined,
  };
}

describe.each(wires)('invalid arguments on the $name wire', ({ name, call, task }) => {
  test('an upstream task-mode tool answers exactly as our own long tool, and creates nothing', async () => {
    const before = upstreams.calls().length;
    const rows = async () =>
      (await sql(stack.db.url, `SELECT count(*)::int AS n FROM app.tasks`))[0].n as number;
    const tasksBefore = await rows();
    const own = await call('bulk_update_records', { collection: 'x', count: -1, patch: {} });
    const upstream = await call('demo.build_artifact', { project: 42 });
    expect(shapeOf(upstream)).toEqual(shapeOf(own));
    // What that answer is: a task-augmented call answers a JSON-RPC error on 2025-11-25 (it
    // must answer CreateTaskResult or an error) and a tool error elsewhere.
    expect(shapeOf(upstream)).toEqual(
      task && name.startsWith('2025')
        ? { error: -32602 }
        : { isError: true, text: 'Invalid arguments', structured: false },
    );
    expect(await rows()).toBe(tasksBefore);
    expect(upstreams.calls().slice(before)).toEqual([]);
  });

  if (!task) {
    test('an upstream instant tool answers exactly as our own instant tool, and sends nothing', async () => {
      const before = upstreams.calls().length;
      const own = await call('get_job_status', { jobId: 7 });
      const upstream = await call('demo.lookup_ticket', { id: 7 });
      expect(shapeOf(upstream)).toEqual(shapeOf(own));
      expect(shapeOf(upstream)).toEqual({
        isError: true,
        text: 'Invalid arguments',
        structured: false,
      });
      expect(upstreams.calls().slice(before)).toEqual([]);
    });
  }
});

describe.each(wires.filter((w) => !w.task))(
  'an instant upstream tool’s result on the $name wire',
  ({ call }) => {
    test('is what the upstream tool returned: content, structuredContent, isError', async () => {
      // The 2026 envelope (resultType, the server's info in _meta) is the wire's, not the
      // tool's; nothing else may be added to what the upstream returned.
      const toolResult = (answer: any) => {
        const { resultType: _r, _meta, ...rest } = answer.result;
        const { 'io.modelcontextprotocol/serverInfo': _s, ...meta } = _meta ?? {};
        return Object.keys(meta).length ? { ...rest, _meta: meta } : rest;
      };
      const ok = await call('demo.lookup_ticket', { id: 'T-3' });
      expect(toolResult(ok)).toEqual({
        content: [{ type: 'text', text: 'ticket T-3: open' }],
        structuredContent: { id: 'T-3', state: 'open', sub: 'alice' },
      });
      // The upstream tool's own error is its result too, as it sent it.
      const missing = await call('demo.lookup_ticket', { id: 'missing' });
      expect(toolResult(missing)).toEqual({
        isError: true,
        content: [{ type: 'text', text: 'ticket missing: not found' }],
      });
    });
  },
);

test('upstream tools advertise no outputSchema (the upstream result is passed on as it is)', async () => {
  const client = await connectV1(stack.mcpUrl, token);
  try {
    const listed = (await client.listTools()).tools.filter((t) => t.name.startsWith('demo.'));
    expect(listed.length).toBeGreaterThan(0);
    for (const t of listed) expect(t.outputSchema).toBeUndefined();
  } finally {
    await client.close();
  }
});

const terminal = (a: any) =>
  a.ok && ['completed', 'failed', 'cancelled'].includes(a.value?.status ?? a.value?.task?.status);

/**
 * The task's result as the wire hands it over: tasks/result (2025-11-25), inlined in tasks/get
 * (2026-07-28), get_job_result's whole CallToolResult (job tools); without the related-task
 * `_meta` and the 2026 `resultType`, which are the wire's.
 */
async function taskResult(wireName: string, taskId: string) {
  let r: any;
  if (wireName.startsWith('job tools')) {
    const client = await connectV1(stack.mcpUrl, token);
    try {
      r = await client.callTool({ name: 'get_job_result', arguments: { jobId: taskId } });
    } finally {
      await client.close();
    }
  } else {
    const answer: any = await (wireName.startsWith('core') ? coreWire : extWire)(
      stack.mcpUrl,
    ).result(token, taskId);
    r = answer.value?.result ?? answer.value;
  }
  const { _meta: _m, resultType: _r, ...rest } = r;
  return rest;
}

for (const wire of [coreWire, extWire, jobToolsWire]) {
  test(`a task-mode upstream tool's task result on the ${wire('').name} wire is the upstream's result`, async () => {
    const w = wire(stack.mcpUrl);
    const resultOf = (id: string) => taskResult(w.name, id);
    const project = `r-${Math.random().toString(36).slice(2, 8)}`;
    const viaTask = await w.start(token, 'demo.build_artifact', { project });
    await pollUntil(() => w.get(token, viaTask), terminal, 20_000);
    expect(await resultOf(viaTask)).toEqual({
      content: [{ type: 'text', text: `built ${project}` }],
      structuredContent: { artifact: `${project}.tar.gz` },
    });
    // Without upstream task support (one plain tools/call), the same.
    const plain = await w.start(token, 'demo.export_ledger', { ledger: project });
    await pollUntil(() => w.get(token, plain), terminal, 20_000);
    expect(await resultOf(plain)).toEqual({
      content: [{ type: 'text', text: `exported ${project}` }],
      structuredContent: { rows: 4 },
    });
    // The upstream tool's own error is the task's result too (completed, a tool error).
    const failing = await w.start(token, 'demo.export_ledger', { ledger: 'missing' });
    await pollUntil(() => w.get(token, failing), terminal, 20_000);
    expect(await resultOf(failing)).toEqual({
      isError: true,
      content: [{ type: 'text', text: 'ledger missing: not found' }],
    });
    const [ended] = await sql(stack.db.url, `SELECT status, outcome FROM app.tasks WHERE id = $1`, [
      failing,
    ]);
    expect(ended).toEqual({ status: 'completed', outcome: 'tool_error' });
    // Stored durably as that result.
    const [stored] = await sql(
      stack.db.url,
      `SELECT result, is_error FROM app.task_results WHERE task_id = $1`,
      [viaTask],
    );
    expect(stored.is_error).toBe(false);
    expect(
      (typeof stored.result === 'string' ? JSON.parse(stored.result) : stored.result)
        .structuredContent,
    ).toEqual({
      artifact: `${project}.tar.gz`,
    });
  });
}
