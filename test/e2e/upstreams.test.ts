import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { mcpPost } from '../support/raw-post.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { planUpstreams } from '../support/upstreams.ts';
import { coreWire, extWire, jobToolsWire } from '../support/wires.ts';

// The demo upstream (apps/upstream-demo: a real MCP server that verifies its own tokens and
// records who called) fronted by the gateway: instant tools proxied, slow ones durable tasks.
let stack: Stack;
let upstreams: Awaited<ReturnType<typeof planUpstreams>>;
let token: string;

beforeAll(async () => {
  upstreams = await planUpstreams({ demoStepMs: 300 });
  await upstreams.start();
  stack = await startStack({
    env: { UPSTREAMS_FILE: upstreams.file },
    onIssuer: (issuer) => upstreams.trust(issuer),
  });
  token = await stack.token('alice', 'acme');
});
afterAll(async () => {
  await stack?.close();
  await upstreams?.close();
});

const terminal = (a: any) =>
  a.ok && ['completed', 'failed', 'cancelled'].includes(a.value?.status ?? a.value?.task?.status);

test('upstream tools appear prefixed for a caller with their scope and are hidden without it', async () => {
  const withScope = await connectV1(stack.mcpUrl, token);
  const without = await connectV1(
    stack.mcpUrl,
    await stack.token('bob', 'acme', { scope: 'reports:run' }),
  );
  try {
    const names = (await withScope.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'demo.lookup_ticket',
        'demo.build_artifact',
        'demo.export_ledger',
        'generate_report',
      ]),
    );
    const build = (await withScope.listTools()).tools.find((t) => t.name === 'demo.build_artifact');
    expect(build?.execution?.taskSupport).toBe('optional');
    expect(build?.inputSchema.properties).toHaveProperty('project');
    const hidden = (await without.listTools()).tools.map((t) => t.name);
    expect(hidden.some((n) => n.startsWith('demo.'))).toBe(false);
  } finally {
    await withScope.close();
    await without.close();
  }
  // Calling one without the scope: the same 403 insufficient_scope as our own tools.
  const r = await fetch(
    stack.mcpUrl,
    mcpPost(
      await stack.token('bob', 'acme', { scope: 'reports:run' }),
      { 'mcp-protocol-version': '2025-11-25' },
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'demo.lookup_ticket', arguments: { id: 'T-1' } },
      },
    ),
  );
  expect(r.status).toBe(403);
  expect(r.headers.get('www-authenticate')).toContain('insufficient_scope');
  expect(r.headers.get('www-authenticate')).toContain('upstream:demo');
});

test('an instant upstream call is proxied with a token exchanged for the upstream, and audited', async () => {
  const before = upstreams.calls().length;
  const client = await connectV1(stack.mcpUrl, token);
  try {
    const r = await client.callTool({ name: 'demo.lookup_ticket', arguments: { id: 'T-7' } });
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent).toEqual({ id: 'T-7', state: 'open', sub: 'alice' });
  } finally {
    await client.close();
  }
  const seen = upstreams
    .calls()
    .slice(before)
    .filter((c) => c.method === 'tools/call');
  expect(seen).toHaveLength(1);
  expect(seen[0]!.sub).toBe('alice');
  expect(seen[0]!.aud).not.toContain(stack.mcpUrl);
  const events = await sql(
    stack.db.url,
    `SELECT body::jsonb AS body FROM audit.events WHERE type = 'upstream.call' AND body::jsonb->>'tool' = 'demo.lookup_ticket'`,
  );
  expect(events).toHaveLength(1);
  expect(events[0].body).toMatchObject({
    subject: 'alice',
    tenant: 'acme',
    data: { upstream: 'demo', upstreamTool: 'lookup_ticket', outcome: 'ok', argumentKeys: ['id'] },
  });
  // Counted per upstream and outcome on the gateway's /metrics.
  expect(await upstreamCalls('ok')).toBeGreaterThanOrEqual(1);
});

/** The gateway's mtg_upstream_calls_total for the demo upstream and one outcome. */
async function upstreamCalls(outcome: string): Promise<number> {
  const text = await (await fetch(new URL('/metrics', stack.gatewayUrl))).text();
  const line = text
    .split('\n')
    .find(
      (l) =>
        l.startsWith('mtg_upstream_calls_total{') &&
        l.includes('upstream="demo"') &&
        l.includes(`outcome="${outcome}"`),
    );
  return line ? Number(line.split(' ').pop()) : 0;
}

for (const wire of [coreWire, extWire, jobToolsWire]) {
  test(`a task-capable upstream tool becomes a durable task on the ${wire('').name} wire; the upstream saw the user, acted for by the worker`, async () => {
    const w = wire(stack.mcpUrl);
    const before = upstreams.calls().length;
    const project = `p-${Math.random().toString(36).slice(2)}`;
    const id = await w.start(token, 'demo.build_artifact', { project });
    await pollUntil(() => w.get(token, id), terminal, 20_000);
    const result = await w.result(token, id);
    expect(JSON.stringify(result)).toContain(`${project}.tar.gz`);
    const seen = upstreams.calls().slice(before);
    const creations = seen.filter((c) => c.method === 'tools/call');
    expect(creations).toHaveLength(1);
    expect(creations[0]!.idempotencyKey).toBe(`task-${id}`);
    expect(seen.filter((c) => c.method === 'tasks/get').length).toBeGreaterThan(0);
    for (const c of seen) {
      expect(c.sub).toBe('alice');
      expect(c.act).toMatchObject({ sub: 'mcp-worker' });
      expect(c.aud).toEqual(upstreams.demoUrl);
    }
    const trail = await sql(
      stack.db.url,
      `SELECT type, body::jsonb AS body FROM audit.events WHERE task_id = $1 ORDER BY seq`,
      [id],
    );
    const types = trail.map((e) => e.type);
    expect(types).toEqual(
      expect.arrayContaining(['task.created', 'upstream.task_created', 'upstream.task_ended']),
    );
    // task.created names the upstream and its tool (argument keys only, never values).
    const created = trail.find((e) => e.type === 'task.created');
    expect(created.body.tool).toBe('demo.build_artifact');
    expect(created.body.data.arguments).toEqual({
      upstream: 'demo',
      upstreamTool: 'build_artifact',
      argumentKeys: ['project'],
    });
    const refreshed = trail.filter((e) => e.type === 'task.identity_refreshed');
    expect(refreshed[0].body.data.target).toBe('upstream:demo');
  });
}

test('an upstream tool without task support runs as one tools/call with progress', async () => {
  const w = coreWire(stack.mcpUrl);
  const before = upstreams.calls().length;
  const id = await w.start(token, 'demo.export_ledger', { ledger: 'l-1' });
  const done = await pollUntil(() => w.get(token, id), terminal, 20_000);
  expect(done.ok && done.value.status).toBe('completed');
  const result = await w.result(token, id);
  expect(JSON.stringify(result)).toContain('exported l-1');
  const seen = upstreams
    .calls()
    .slice(before)
    .filter((c) => c.method === 'tools/call');
  expect(seen).toHaveLength(1);
  expect(seen[0]!.act).toMatchObject({ sub: 'mcp-worker' });
});

test('cancelling a running upstream task sends tasks/cancel upstream before our cancel returns', async () => {
  const w = coreWire(stack.mcpUrl);
  const before = upstreams.calls().length;
  const id = await w.start(token, 'demo.build_artifact', { project: 'to-cancel' });
  await pollUntil(
    async () => upstreams.calls().slice(before),
    (calls) => calls.some((c) => c.method === 'tasks/get'),
    10_000,
  );
  const cancelled = await w.cancel(token, id);
  expect(cancelled.ok).toBe(true);
  const afterCancel = upstreams.calls().slice(before);
  expect(afterCancel.some((c) => c.method === 'tasks/cancel')).toBe(true);
  const count = afterCancel.length;
  await new Promise((r) => setTimeout(r, 800));
  expect(upstreams.calls().slice(before)).toHaveLength(count);
  const events = await sql(
    stack.db.url,
    `SELECT body::jsonb AS body FROM audit.events WHERE type = 'upstream.task_cancelled' AND task_id = $1`,
    [id],
  );
  expect(events[0].body.data).toMatchObject({ upstream: 'demo', acknowledged: true });
});

test('twenty identical concurrent starts of an upstream tool make one upstream call', async () => {
  const before = upstreams.calls().length;
  const ids = await Promise.all(
    Array.from({ length: 20 }, () =>
      coreWire(stack.mcpUrl).start(token, 'demo.build_artifact', { project: 'same' }),
    ),
  );
  expect(new Set(ids).size).toBe(1);
  await pollUntil(() => coreWire(stack.mcpUrl).get(token, ids[0]!), terminal, 20_000);
  const creations = upstreams
    .calls()
    .slice(before)
    .filter((c) => c.method === 'tools/call');
  expect(creations).toHaveLength(1);
});

test('with the upstream stopped an instant call is a clear tool error, never a 500', async () => {
  await upstreams.stopDemo();
  try {
    const client = await connectV1(stack.mcpUrl, token);
    try {
      const r = await client.request(
        { method: 'tools/call', params: { name: 'demo.lookup_ticket', arguments: { id: 'x' } } },
        CallToolResultSchema,
      );
      expect(r.isError).toBe(true);
      expect((r._meta as any)['io.mcp-task-gateway/tool-error'].code).toMatch(
        /^upstream_(unreachable|circuit_open)$/,
      );
      // The tools are still listed: served from the last good catalogue.
      expect((await client.listTools()).tools.map((t) => t.name)).toContain('demo.lookup_ticket');
      expect(
        (await upstreamCalls('failed')) + (await upstreamCalls('circuit_open')),
      ).toBeGreaterThanOrEqual(1);
    } finally {
      await client.close();
    }
  } finally {
    await upstreams.restartDemo();
  }
});

test("an upstream's notifications/tools/list_changed makes its new tool appear without waiting for the refresh", async () => {
  const added = await fetch(new URL('/_tools', upstreams.demoUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'say_hello' }),
  });
  expect(added.status).toBe(204);
  const client = await connectV1(stack.mcpUrl, token);
  try {
    // refreshMs is 60 s here: only the notification can bring it within the wait.
    await pollUntil(
      async () => (await client.listTools()).tools.map((t) => t.name),
      (names) => names.includes('demo.say_hello'),
      10_000,
    );
    const r = await client.callTool({ name: 'demo.say_hello', arguments: { text: 'hi there' } });
    expect(JSON.stringify(r.content)).toContain('hi there');
  } finally {
    await client.close();
  }
  const [row] = await sql(
    stack.db.url,
    `SELECT upstream, upstream_name FROM app.upstream_tools WHERE name = 'demo.say_hello'`,
  );
  expect(row).toEqual({ upstream: 'demo', upstream_name: 'say_hello' });
});

test('the demo upstream refuses a token meant for the gateway', async () => {
  const r = await fetch(upstreams.demoUrl, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
  });
  expect(r.status).toBe(401);
});

test('a gateway that starts while the upstream is down serves its tools from the stored catalogue', async () => {
  await upstreams.stopDemo();
  try {
    await stack.restartGateway();
    const client = await connectV1(stack.mcpUrl, token);
    try {
      const names = (await client.listTools()).tools.map((t) => t.name);
      expect(names).toEqual(expect.arrayContaining(['demo.lookup_ticket', 'demo.build_artifact']));
      const r = await client.callTool({ name: 'demo.lookup_ticket', arguments: { id: 'T-9' } });
      expect(r.isError).toBe(true);
      expect((r._meta as any)['io.mcp-task-gateway/tool-error'].code).toMatch(/^upstream_/);
    } finally {
      await client.close();
    }
    const [status] = await sql(
      stack.db.url,
      `SELECT last_error IS NOT NULL AS failed FROM app.upstream_status WHERE upstream = 'demo'`,
    );
    expect(status.failed).toBe(true);
  } finally {
    await upstreams.restartDemo();
  }
});
