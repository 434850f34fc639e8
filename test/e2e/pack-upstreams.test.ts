import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { planUpstreams } from '../support/upstreams.ts';
import { coreWire } from '../support/wires.ts';

// A pack acts as its users at an upstream only where it said it would, and only with the
// scope the upstream's configuration requires, when the task's delegation holds it.
const fixture = (name: string) => `./test/fixtures/packs/${name}.ts`;
let stack: Stack;
let upstreams: Awaited<ReturnType<typeof planUpstreams>>;
const wire = () => coreWire(stack.mcpUrl);

beforeAll(async () => {
  upstreams = await planUpstreams({ demoStepMs: 50 });
  await upstreams.start();
  stack = await startStack({
    workers: 0,
    env: {
      UPSTREAMS_FILE: upstreams.file,
      TOOL_PACKS: `@mtg/demo-tools,${fixture('calls-upstream')},${fixture('undeclared-upstream')}`,
    },
    onIssuer: (issuer) => upstreams.trust(issuer),
  });
  // One attempt: a tool's bug (an undeclared upstream) fails its task at once.
  await stack.addWorker({ WORKER_MAX_ATTEMPTS: '1' });
});
afterAll(async () => {
  await stack?.close();
  await upstreams?.close();
});

async function run(token: string, tool: string, args: Record<string, unknown>) {
  const w = wire();
  const id = await w.start(token, tool, args);
  const done = await pollUntil(
    () => w.get(token, id),
    (a) => a.ok && a.value.status !== 'working',
    20_000,
    50,
  );
  const trail = await sql(
    stack.db.url,
    `SELECT type, reason, body::jsonb AS body FROM audit.events WHERE task_id = $1 ORDER BY seq`,
    [id],
  );
  return { id, status: (done as any).value.status, result: await w.result(token, id), trail };
}

const upstreamExchanges = (trail: any[]) =>
  trail.filter(
    (e) => e.type === 'task.identity_refreshed' && e.body.data.target === 'upstream:demo',
  );

test('a declared upstream is called with the scope its configuration requires: sub = the user, act = the worker', async () => {
  const token = await stack.token('una', 'acme', { scope: 'upstream:demo' });
  const before = upstreams.calls().length;
  const r = await run(token, 'ticket_digest', { id: 'T-7' });
  expect(r.status).toBe('completed');
  expect(JSON.stringify(r.result)).toContain('T-7');
  const [exchange] = upstreamExchanges(r.trail);
  expect(exchange.body.data.scope).toEqual(['upstream:demo']);
  const seen = upstreams.calls().slice(before);
  expect(seen.filter((c) => c.method === 'tools/call' && c.tool === 'lookup_ticket')).toHaveLength(
    1,
  );
  for (const c of seen) {
    expect(c.sub).toBe('una');
    expect(c.act).toMatchObject({ sub: 'mcp-worker' });
  }
});

test("a tool whose delegation lacks the upstream's scope is refused upstream_scope_missing, audited, and nothing is exchanged or sent", async () => {
  // Only records:write: the tool's scope, not the upstream's (upstream:demo).
  const token = await stack.token('rex', 'acme', { scope: 'records:write' });
  const before = upstreams.calls().length;
  const r = await run(token, 'records_then_ticket', { id: 'T-8' });
  expect(r.status).toBe('completed');
  expect(JSON.stringify(r.result)).toContain(
    '"io.mcp-task-gateway/tool-error":{"code":"upstream_scope_missing"}',
  );
  expect(JSON.stringify(r.result)).toContain('requires scope upstream:demo');
  expect(upstreamExchanges(r.trail)).toEqual([]);
  const denied = r.trail.filter((e) => e.type === 'task.denied');
  expect(denied).toHaveLength(1);
  expect(denied[0].reason).toBe('upstream_scope_missing');
  expect(denied[0].body.data).toMatchObject({
    verb: 'upstream',
    upstream: 'demo',
    scope: 'upstream:demo',
    held: ['records:write'],
  });
  expect(upstreams.calls().slice(before)).toEqual([]);
});

test('an upstream the pack did not declare is refused at the call: the task fails and the upstream sees nothing', async () => {
  const token = await stack.token('uma', 'acme', { scope: 'upstream:demo' });
  const before = upstreams.calls().length;
  const r = await run(token, 'sneaky_ticket', { id: 'T-9' });
  expect(r.status).toBe('failed');
  expect(JSON.stringify(r.result)).toContain('which its pack does not declare');
  expect(upstreamExchanges(r.trail)).toEqual([]);
  expect(upstreams.calls().slice(before)).toEqual([]);
});

test('a worker serving a pack that declares an upstream UPSTREAMS_FILE does not define refuses to start, naming both', async () => {
  await expect(
    stack.addWorker({ TOOL_PACKS: `@mtg/demo-tools,${fixture('needs-other-upstream')}` }),
  ).rejects.toMatchObject({
    name: 'WorkerSetupError',
    message: expect.stringContaining(
      'pack needs-other-upstream needs upstream billing (for billing_digest), which UPSTREAMS_FILE does not define',
    ),
  });
});
