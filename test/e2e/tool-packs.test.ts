import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectV1, connectV2 } from '../support/clients.ts';
import { planTargets } from '../support/extra-targets.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { coreWire, extWire } from '../support/wires.ts';
import { startWorkerProcess, waitForExit } from '../support/worker-process.ts';

// A team's own pack, outside the workspace, loaded by configuration next to the demo pack;
// its long tool writes to two targets (two real downstream servers, each accepting only
// tokens for its own audience), run by real worker processes.
const ACME = fileURLToPath(new URL('../../examples/acme-tools', import.meta.url));
let stack: Stack;
let targets: Awaited<ReturnType<typeof planTargets>>;
let token: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  targets = await planTargets(['crm', 'ledger']);
  stack = await startStack({
    workers: 0,
    env: {
      TOOL_PACKS: `@mtg/demo-tools,${ACME}`,
      TARGETS_FILE: targets.file,
      ACME_INVOICE_DELAY_MS: '150',
      ACME_CURRENCY: 'GBP',
    },
  });
  await targets.start(stack);
  children.push(
    await startWorkerProcess(stack, 'acme-a'),
    await startWorkerProcess(stack, 'acme-b'),
  );
  token = await stack.token('alice', 'acme');
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await Promise.all(children.map(waitForExit));
  await stack?.close();
  await targets?.close();
});

test("a v1 and a v2 client list the pack's tools next to the demo tools and call its instant tool", async () => {
  const v1 = await connectV1(stack.mcpUrl, token);
  const v2 = await connectV2(stack.mcpUrl, token);
  try {
    const v1Listed = await v1.listTools();
    for (const listed of [v1Listed, await v2.listTools()]) {
      const names = listed.tools.map((t) => t.name);
      expect(names).toEqual(
        expect.arrayContaining(['acme_quote_price', 'acme_sync_invoices', 'generate_report']),
      );
    }
    // 2025-11-25 advertises task support per tool.
    const long = v1Listed.tools.find((t) => t.name === 'acme_sync_invoices');
    expect(long?.execution?.taskSupport).toBe('optional');
    const a = await v1.callTool({
      name: 'acme_quote_price',
      arguments: { sku: 'GADGET', quantity: 3 },
    });
    const b = await v2.callTool({
      name: 'acme_quote_price',
      arguments: { sku: 'GADGET', quantity: 3 },
    });
    for (const r of [a, b]) {
      expect(r.isError).toBeFalsy();
      expect(r.structuredContent).toEqual({
        sku: 'GADGET',
        quantity: 3,
        total: 30,
        currency: 'GBP',
      });
    }
    // The pack's ToolError reaches the caller as the tool's error, with its code.
    const refused = await v1.callTool({
      name: 'acme_quote_price',
      arguments: { sku: 'NOPE', quantity: 1 },
    });
    expect(refused.isError).toBe(true);
    expect(refused.content).toEqual([{ type: 'text', text: expect.stringContaining('NOPE') }]);
    expect(refused._meta).toEqual({ 'io.mcp-task-gateway/tool-error': { code: 'unknown_sku' } });
  } finally {
    await v1.close();
    await v2.close();
  }
});

test('the protected resource metadata and a token without the scope follow the registry', async () => {
  const metadata = (await (
    await fetch(new URL('/.well-known/oauth-protected-resource/mcp', stack.gatewayUrl))
  ).json()) as { scopes_supported: string[] };
  expect(metadata.scopes_supported).toEqual(
    expect.arrayContaining(['invoices:sync', 'reports:run', 'tasks:admin']),
  );
  const narrow = await stack.token('alice', 'acme', { scope: 'reports:run' });
  const client = await connectV1(stack.mcpUrl, narrow);
  try {
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).not.toContain('acme_sync_invoices');
    expect(names).toContain('generate_report');
  } finally {
    await client.close();
  }
});

async function writesOf(taskId: string) {
  return (await stack.writes(taskId)) as Array<{ sub: string; act: any; idempotencyKey: string }>;
}

test('the long tool runs as a durable task on the 2025-11-25 wire; each target got its own token, sub = the user, act = the worker', async () => {
  const client = await connectV1(stack.mcpUrl, token);
  let taskId: string;
  try {
    const created = await client.request(
      {
        method: 'tools/call',
        params: {
          name: 'acme_sync_invoices',
          arguments: { account: 'ACME-7', invoices: 3 },
          task: {},
        },
      },
      CreateTaskResultSchema,
    );
    taskId = created.task.taskId;
  } finally {
    await client.close();
  }
  const wire = coreWire(stack.mcpUrl);
  await pollUntil(
    () => wire.get(token, taskId),
    (a) => a.ok && a.value.status === 'completed',
    30_000,
    100,
  );
  const result = await wire.result(token, taskId);
  expect(result.ok && result.value.structuredContent).toEqual({
    account: 'ACME-7',
    invoices: 3,
    currency: 'GBP',
  });

  const writes = await writesOf(taskId);
  expect(writes).toHaveLength(5); // open, three invoices, close
  expect(writes.every((w) => w.sub === 'alice' && w.act?.sub === 'mcp-worker')).toBe(true);
  // Each target accepts only its own audience, so a write there proves the token's audience;
  // the trail names both.
  const refreshed = await sql(
    stack.db.url,
    `SELECT body::jsonb -> 'data' AS data FROM audit.events
      WHERE task_id = $1 AND type = 'task.identity_refreshed' ORDER BY seq`,
    [taskId],
  );
  const audiences = new Map(refreshed.map((r) => [r.data.target, r.data.to.audience]));
  expect(Object.fromEntries(audiences)).toEqual({
    crm: targets.urls.crm,
    ledger: targets.urls.ledger,
  });
  expect(
    refreshed.every((r) => r.data.to.subject === 'alice' && r.data.to.act?.sub === 'mcp-worker'),
  ).toBe(true);
  const [row] = await sql(
    stack.db.url,
    'SELECT tool_version, tool_fingerprint, registry_fingerprint, job_queue FROM app.tasks WHERE id = $1',
    [taskId],
  );
  expect(row.tool_version).toBe('1.0.0');
  expect(row.registry_fingerprint).toBe(stack.registry.fingerprint);
  expect(row.job_queue).toBe(stack.registry.queues().get('acme_sync_invoices'));
});

test('2026-07-28 wire: SIGKILL the worker mid-task; another resumes it without repeating a finished step or write', async () => {
  const wire = extWire(stack.mcpUrl);
  const taskId = await wire.start(token, 'acme_sync_invoices', { account: 'ACME-9', invoices: 12 });
  const [{ lease_owner }] = await pollUntil(
    () =>
      sql(
        stack.db.url,
        `SELECT lease_owner, (SELECT count(*)::int FROM app.task_steps WHERE task_id = $1) AS steps
           FROM app.tasks WHERE id = $1`,
        [taskId],
      ),
    (r) => r[0].lease_owner && r[0].steps >= 3,
    20_000,
    50,
  );
  const victim = lease_owner === 'acme-a' ? children[0]! : children[1]!;
  victim.kill('SIGKILL');
  await waitForExit(victim);

  await pollUntil(
    () => wire.get(token, taskId),
    (a) => a.ok && a.value.status === 'completed',
    60_000,
    200,
  );
  const steps = await sql(stack.db.url, 'SELECT step FROM app.task_steps WHERE task_id = $1', [
    taskId,
  ]);
  expect(steps).toHaveLength(14);
  const completed = await sql(
    stack.db.url,
    `SELECT body::jsonb->'data'->>'step' AS step, count(*)::int AS n FROM audit.events
      WHERE task_id = $1 AND type = 'task.step_completed' GROUP BY 1`,
    [taskId],
  );
  expect(completed).toHaveLength(14);
  expect(completed.every((e) => e.n === 1)).toBe(true);
  const writes = await writesOf(taskId);
  expect(writes).toHaveLength(14);
  expect(new Set(writes.map((w) => w.idempotencyKey)).size).toBe(14);
  const takeover = await sql(
    stack.db.url,
    `SELECT count(*)::int AS n FROM audit.events WHERE task_id = $1 AND type = 'task.lease_taken'`,
    [taskId],
  );
  expect(takeover[0].n).toBeGreaterThanOrEqual(1);
});
