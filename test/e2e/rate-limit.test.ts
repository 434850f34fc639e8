import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectV1 } from '../support/clients.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire } from '../support/wires.ts';

// Limits set low on purpose; the defaults are far above what tests and benchmarks do.
let stack: Stack;
beforeAll(async () => {
  stack = await startStack({
    workers: 0,
    env: {
      RATE_LIMIT_STARTS_PER_MINUTE: '3',
      RATE_LIMIT_CLIENT_STARTS_PER_MINUTE: '6',
      RATE_LIMIT_POLLS_PER_SECOND: '3',
    },
  });
});
afterAll(async () => {
  await stack?.close();
});

type Sc = Record<string, any>;
const report = (n: number) => ({
  name: 'generate_report',
  arguments: { report: `rl-${n}-${Math.random().toString(36).slice(2)}` },
});

async function deniedAudits(subject: string) {
  return sql(
    stack.db.url,
    `SELECT type, reason, body FROM audit.events WHERE subject = $1 AND reason = 'rate_limited' ORDER BY seq`,
    [subject],
  );
}

test('a user over the start limit gets each wire’s rate-limit answer with a retry hint; another user is unaffected', async () => {
  const token = await stack.token('rl-alice', 'acme');
  const client = await connectV1(stack.mcpUrl, token);
  for (let i = 0; i < 3; i++) {
    const r = await client.callTool(report(i));
    expect(r.isError).toBeFalsy();
  }

  // Job tools (no task support): an isError tool result, the hint in structuredContent.
  const plain = await client.callTool(report(3));
  expect(plain.isError).toBe(true);
  expect(plain.structuredContent).toMatchObject({
    error: 'rate_limited',
    retryAfterSeconds: expect.any(Number),
  });
  expect((plain.structuredContent as Sc).retryAfterSeconds).toBeGreaterThan(0);
  expect((plain.structuredContent as Sc).retryAfterSeconds).toBeLessThanOrEqual(60);

  // Core tasks (2025-11-25): a JSON-RPC error in the -32000 range with data.
  const core = await client
    .request({ method: 'tools/call', params: { ...report(4), task: {} } }, CallToolResultSchema)
    .then(
      () => undefined,
      (e: { code: number; data?: Sc }) => e,
    );
  expect(core?.code).toBe(-32000);
  expect(core?.data).toMatchObject({
    reason: 'rate_limited',
    retryAfterSeconds: expect.any(Number),
  });
  await client.close();

  // Tasks extension (2026-07-28), raw: the same error, and the HTTP response says Retry-After.
  const response = await fetchRaw(token, 'tools/call', report(5));
  expect(response.body.error).toMatchObject({ code: -32000, data: { reason: 'rate_limited' } });
  expect(Number(response.retryAfter)).toBeGreaterThan(0);

  // Limits are per subject: bob, same tenant and client, starts freely.
  const bob = await connectV1(stack.mcpUrl, await stack.token('rl-bob', 'acme'));
  expect((await bob.callTool(report(6))).isError).toBeFalsy();
  await bob.close();

  // Three denials, one audit event: at most one per caller per window.
  const audits = await deniedAudits('rl-alice');
  expect(audits).toHaveLength(1);
  expect(audits[0]).toMatchObject({ type: 'task.denied', reason: 'rate_limited' });
  expect(JSON.parse(audits[0].body).data).toMatchObject({ verb: 'start', limit: 'starts' });
  // Nothing was created for the refused starts.
  const [{ n }] = await sql(
    stack.db.url,
    `SELECT count(*)::int AS n FROM app.tasks WHERE subject = 'rl-alice'`,
  );
  expect(n).toBe(3);
});

test('starts are limited per client across its users too', async () => {
  const starts: Array<boolean> = [];
  for (const sub of ['rl-c1', 'rl-c2', 'rl-c3']) {
    const client = await connectV1(
      stack.mcpUrl,
      await stack.token(sub, 'acme', { client: 'mcp-agent-2' }),
    );
    for (let i = 0; i < (sub === 'rl-c3' ? 1 : 3); i++) {
      const r = await client.callTool(report(i));
      starts.push(!r.isError);
      if (r.isError) expect(r.structuredContent).toMatchObject({ error: 'rate_limited' });
    }
    await client.close();
  }
  // Six per minute for the client: rl-c3's first start is over.
  expect(starts).toEqual([true, true, true, true, true, true, false]);
  expect(JSON.parse((await deniedAudits('rl-c3'))[0].body).data).toMatchObject({
    limit: 'client_starts',
  });
});

test('the client limit is counted per tenant: one tenant’s busy users do not lock another tenant out of the same application', async () => {
  const startAs = async (sub: string, tenant: string, n: number) => {
    const client = await connectV1(
      stack.mcpUrl,
      await stack.token(sub, tenant, { client: 'mcp-agent-2' }),
    );
    const outcomes: boolean[] = [];
    for (let i = 0; i < n; i++) outcomes.push(!(await client.callTool(report(i))).isError);
    await client.close();
    return outcomes;
  };
  // initech's users use up mcp-agent-2's six starts there…
  expect([
    ...(await startAs('rl-i1', 'initech', 3)),
    ...(await startAs('rl-i2', 'initech', 3)),
  ]).toEqual(Array(6).fill(true));
  expect(await startAs('rl-i3', 'initech', 1)).toEqual([false]);
  expect(JSON.parse((await deniedAudits('rl-i3'))[0].body).data).toMatchObject({
    limit: 'client_starts',
  });
  // …and umbrella's user of the same application is not affected.
  expect(await startAs('rl-u1', 'umbrella', 3)).toEqual([true, true, true]);
});

test('the tenant limit counts every client and user of the tenant', async () => {
  const tight = await startStack({
    workers: 0,
    env: {
      RATE_LIMIT_STARTS_PER_MINUTE: '3',
      RATE_LIMIT_CLIENT_STARTS_PER_MINUTE: '0',
      RATE_LIMIT_TENANT_STARTS_PER_MINUTE: '4',
    },
  });
  try {
    const startAs = async (sub: string, tenant: string, clientId: string) => {
      const client = await connectV1(
        tight.mcpUrl,
        await tight.token(sub, tenant, { client: clientId }),
      );
      try {
        return await client.callTool(report(0));
      } finally {
        await client.close();
      }
    };
    for (const [sub, clientId] of [
      ['rl-t1', 'mcp-agent'],
      ['rl-t1', 'mcp-agent'],
      ['rl-t2', 'mcp-agent-2'],
      ['rl-t3', 'mcp-agent-2'],
    ]) {
      expect((await startAs(sub!, 'hooli', clientId!)).isError).toBeFalsy();
    }
    const over = await startAs('rl-t4', 'hooli', 'mcp-agent');
    expect(over.isError).toBe(true);
    expect(over.structuredContent).toMatchObject({ error: 'rate_limited' });
    expect((over.content as Array<{ text: string }>)[0]!.text).toContain(
      'task starts per tenant per minute',
    );
    expect((await startAs('rl-t5', 'pied-piper', 'mcp-agent')).isError).toBeFalsy();
  } finally {
    await tight.close();
  }
});

test('polls faster than the limit are refused with a retry hint, and the caller polls again after the window', async () => {
  const token = await stack.token('rl-poller', 'acme');
  const wire = jobToolsWire(stack.mcpUrl);
  const jobId = await wire.start(token, 'generate_report', { report: 'polled' });
  const client = await connectV1(stack.mcpUrl, token);
  const burst = await Promise.all(
    Array.from({ length: 12 }, () =>
      client.callTool({ name: 'get_job_status', arguments: { jobId } }),
    ),
  );
  const refused = burst.filter((r) => r.isError);
  expect(refused.length).toBeGreaterThan(0);
  expect(burst.length - refused.length).toBeLessThanOrEqual(3 * 2); // the burst may straddle two windows
  for (const r of refused)
    expect(r.structuredContent).toMatchObject({ error: 'rate_limited', retryAfterSeconds: 1 });

  // The next window, by the gateway's clock: polling is allowed again.
  stack.clock.advance(1000);
  const again = await client.callTool({ name: 'get_job_status', arguments: { jobId } });
  expect(again.isError).toBeFalsy();
  expect(again.structuredContent).toMatchObject({ jobId, status: 'working' });
  await client.close();

  const audits = await deniedAudits('rl-poller');
  expect(audits.length).toBeGreaterThanOrEqual(1);
  expect(audits.length).toBeLessThanOrEqual(2);
  expect(audits.length).toBeLessThan(refused.length + 1);
});

test('a limit of 0 turns it off', async () => {
  const off = await startStack({
    workers: 0,
    env: {
      RATE_LIMIT_STARTS_PER_MINUTE: '0',
      RATE_LIMIT_CLIENT_STARTS_PER_MINUTE: '0',
      RATE_LIMIT_TENANT_STARTS_PER_MINUTE: '0',
    },
  });
  try {
    const client = await connectV1(off.mcpUrl, await off.token('rl-free', 'acme'));
    for (let i = 0; i < 8; i++) expect((await client.callTool(report(i))).isError).toBeFalsy();
    await client.close();
  } finally {
    await off.close();
  }
});

async function fetchRaw(token: string, method: string, params: Record<string, unknown>) {
  // rpc2026 does not expose headers; repeat its framing with fetch to read Retry-After.
  let retryAfter: string | null = null;
  const original = globalThis.fetch;
  globalThis.fetch = async (...args: Parameters<typeof fetch>) => {
    const r = await original(...args);
    retryAfter = r.headers.get('retry-after');
    return r;
  };
  try {
    const r = await rpc2026(stack.mcpUrl, token, method, params, { tasksExtension: true });
    return { ...r, retryAfter };
  } finally {
    globalThis.fetch = original;
  }
}
