import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { planUpstreams } from '../support/upstreams.ts';
import { coreWire, jobToolsWire } from '../support/wires.ts';

// A real upstream nobody here wrote: @modelcontextprotocol/server-everything over its
// Streamable HTTP transport (sessions; tasks kept per session, in memory), started on loopback.
// It verifies no tokens: this file covers the protocol; identity is proven on the demo upstream.
let stack: Stack;
let upstreams: Awaited<ReturnType<typeof planUpstreams>>;
let token: string;

// The workload policy names upstream tools like any other: mcp-agent-2 may only echo.
const POLICY = `
workloads:
  - id: mcp-agent
    tools: [ev.echo, ev.get-sum, ev.simulate-research-query, ev.trigger-long-running-operation,
            get_job_status, get_job_result, cancel_job, list_jobs]
  - id: mcp-agent-2
    tools: [ev.echo]
default: deny
`;

beforeAll(async () => {
  upstreams = await planUpstreams({ everything: true });
  await upstreams.start();
  const policyFile = path.join(await mkdtemp(path.join(os.tmpdir(), 'mtg-policy-')), 'policy.yaml');
  await writeFile(policyFile, POLICY);
  stack = await startStack({
    env: {
      UPSTREAMS_FILE: upstreams.file,
      POLICY_FILE: policyFile,
      RATE_LIMIT_UPSTREAM_CALLS_PER_MINUTE: '5',
    },
    onIssuer: (issuer) => upstreams.trust(issuer),
  });
  token = await stack.token('alice', 'acme');
}, 60_000);
afterAll(async () => {
  await stack?.close();
  await upstreams?.close();
});

const terminal = (a: any) =>
  a.ok && ['completed', 'failed', 'cancelled'].includes(a.value?.status ?? a.value?.task?.status);

test("server-everything's included tools are listed prefixed, its instant tools proxied", async () => {
  const client = await connectV1(stack.mcpUrl, token);
  try {
    const listed = (await client.listTools()).tools;
    const names = listed.map((t) => t.name).filter((n) => n.startsWith('ev.'));
    expect(names.sort()).toEqual([
      'ev.echo',
      'ev.get-sum',
      'ev.simulate-research-query',
      'ev.trigger-long-running-operation',
    ]);
    expect(
      listed.find((t) => t.name === 'ev.simulate-research-query')?.execution?.taskSupport,
    ).toBe('optional');
    const echo = await client.callTool({ name: 'ev.echo', arguments: { message: 'hello' } });
    expect(echo.isError).toBeFalsy();
    expect(JSON.stringify(echo.content)).toContain('hello');
    const sum = await client.callTool({ name: 'ev.get-sum', arguments: { a: 2, b: 40 } });
    expect(JSON.stringify(sum.content)).toContain('42');
    // Arguments are checked against the upstream's own schema before anything is sent.
    const bad = await client.callTool({ name: 'ev.get-sum', arguments: { a: 'two' } });
    expect(bad.isError).toBe(true);
  } finally {
    await client.close();
  }
  const audited = await sql(
    stack.db.url,
    `SELECT body::jsonb->'data' AS data FROM audit.events WHERE type = 'upstream.call' ORDER BY seq`,
  );
  expect(audited.map((e) => e.data.upstreamTool)).toEqual(['echo', 'get-sum']);
});

test('its task-capable simulate-research-query runs as a durable task polling the upstream task', async () => {
  const w = coreWire(stack.mcpUrl);
  const id = await w.start(token, 'ev.simulate-research-query', { topic: 'durable tasks' });
  const done = await pollUntil(() => w.get(token, id), terminal, 30_000);
  expect(done.ok && done.value.status).toBe('completed');
  const result = await w.result(token, id);
  expect(result.ok).toBe(true);
  expect(JSON.stringify(result)).toContain('durable tasks');
  const journal = await sql(
    stack.db.url,
    `SELECT step, output FROM app.task_steps WHERE task_id = $1 ORDER BY seq`,
    [id],
  );
  expect(journal.map((s) => s.step)).toEqual(['upstream:create']);
  expect(journal[0].output.value).toMatchObject({
    taskId: expect.any(String),
    sessionId: expect.any(String),
  });
});

test('its trigger-long-running-operation (no task support) runs as a task, its progress mirrored', async () => {
  const w = jobToolsWire(stack.mcpUrl);
  const id = await w.start(token, 'ev.trigger-long-running-operation', { duration: 2, steps: 4 });
  const seen = await pollUntil(
    () => sql(stack.db.url, `SELECT progress, status FROM app.tasks WHERE id = $1`, [id]),
    (rows) => rows[0]?.progress?.total === 4,
    20_000,
  );
  expect(seen[0].progress.current).toBeGreaterThan(0);
  await pollUntil(() => w.get(token, id), terminal, 20_000);
  // The task's result is the upstream's own (text content, no structuredContent).
  const client = await connectV1(stack.mcpUrl, token);
  try {
    const result = await client.callTool({ name: 'get_job_result', arguments: { jobId: id } });
    expect(result.isError).toBeFalsy();
    expect(JSON.stringify(result.content)).toContain('Long running operation completed');
  } finally {
    await client.close();
  }
});

test('the workload policy filters upstream tools: mcp-agent-2 sees and calls only ev.echo', async () => {
  const client = await connectV1(
    stack.mcpUrl,
    await stack.token('alice', 'acme', { client: 'mcp-agent-2' }),
  );
  try {
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names.filter((n) => n.startsWith('ev.'))).toEqual(['ev.echo']);
    const echo = await client.callTool({ name: 'ev.echo', arguments: { message: 'ok' } });
    expect(echo.isError).toBeFalsy();
    await expect(
      client.callTool({ name: 'ev.get-sum', arguments: { a: 1, b: 2 } }),
    ).rejects.toMatchObject({ code: -32602 });
  } finally {
    await client.close();
  }
});

test('proxied calls are limited per caller: the sixth in a minute is refused and audited, another caller is not affected', async () => {
  const client = await connectV1(stack.mcpUrl, await stack.token('dora', 'acme'));
  try {
    for (let i = 0; i < 5; i++) {
      const ok = await client.callTool({ name: 'ev.echo', arguments: { message: `m${i}` } });
      expect(ok.isError).toBeFalsy();
    }
    const refused = await client.callTool({ name: 'ev.echo', arguments: { message: 'm5' } });
    expect(refused.isError).toBe(true);
    expect((refused._meta as any)['io.mcp-task-gateway/tool-error'].code).toBe('rate_limited');
  } finally {
    await client.close();
  }
  // Another caller is not affected.
  const other = await connectV1(stack.mcpUrl, await stack.token('erin', 'acme'));
  try {
    expect(
      (await other.callTool({ name: 'ev.echo', arguments: { message: 'x' } })).isError,
    ).toBeFalsy();
  } finally {
    await other.close();
  }
  const outcomes = await sql(
    stack.db.url,
    `SELECT body::jsonb->'data'->>'outcome' AS outcome FROM audit.events
      WHERE type = 'upstream.call' AND body::jsonb->>'subject' = 'dora' ORDER BY seq`,
  );
  expect(outcomes.map((o) => o.outcome)).toEqual(['ok', 'ok', 'ok', 'ok', 'ok', 'rate_limited']);
});
