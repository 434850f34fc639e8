// PostgreSQL going away (restart, failover, a network cut) is an outage, not a bug: every
// wire answers 503 with Retry-After (or, inside an MCP exchange, JSON-RPC -32000 with
// retryAfterSeconds), never a 500 or the driver's message, and the gateway carries on when
// the database is back. The gateway reaches PostgreSQL through a TCP relay the test cuts.
import { connectV1 } from '../support/clients.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';
import { pollUntil } from '../support/poll.ts';

let stack: Stack;
let proxy: TcpProxy;
let token: string;
let taskId: string;

beforeAll(async () => {
  stack = await startStack({ workers: 0 });
  const db = new URL(stack.db.url);
  proxy = await startTcpProxy({ host: db.hostname, port: Number(db.port || 5432) });
  stack.env.DATABASE_URL = proxy.via(stack.env.DATABASE_URL!);
  await stack.restartGateway();
  token = await stack.token('olga', 'acme');
  const started = await rpc2026(
    stack.mcpUrl,
    token,
    'tools/call',
    { name: 'generate_report', arguments: { report: 'outage' } },
    { tasksExtension: true },
  );
  taskId = started.body.result.taskId;
});
afterAll(async () => {
  await proxy?.up().catch(() => {});
  await stack?.close();
  await proxy?.close();
});

const requests = {
  'tasks/get (2026)': () =>
    rpc2026(stack.mcpUrl, token, 'tasks/get', { taskId }, { tasksExtension: true }),
  'tools/call start (2026)': () =>
    rpc2026(
      stack.mcpUrl,
      token,
      'tools/call',
      { name: 'generate_report', arguments: { report: `during-${Math.random()}` } },
      { tasksExtension: true },
    ),
  'whoami (2026)': () => rpc2026(stack.mcpUrl, token, 'tools/call', { name: 'whoami' }),
};

test('with the database unreachable every request gets 503 + Retry-After and a retry hint', async () => {
  await proxy.down();
  for (const [name, send] of Object.entries(requests)) {
    const r = await send();
    expect({ name, status: r.status }).toEqual({ name, status: 503 });
    expect(r.body).toMatchObject({
      jsonrpc: '2.0',
      error: { code: -32000, data: { reason: 'unavailable', retryAfterSeconds: 5 } },
    });
    expect(JSON.stringify(r.body)).not.toMatch(/ECONNREFUSED|terminated|127\.0\.0\.1/);
  }
  const raw = await fetch(stack.mcpUrl, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} }),
  });
  expect(raw.status).toBe(503);
  expect(raw.headers.get('retry-after')).toBe('5');
  // The legacy wire too, through the real v1 client: it fails to connect, and says why.
  await expect(connectV1(stack.mcpUrl, token)).rejects.toThrow(/Temporarily unavailable/);
  const ready = await fetch(new URL('/readyz', stack.mcpUrl));
  expect(ready.status).toBe(503);
});

test('when the database is back the same requests succeed, with no restart', async () => {
  await proxy.up();
  const deadline = Date.now() + 20_000;
  let last: { status: number; body: any } | undefined;
  while (Date.now() < deadline) {
    last = await requests['tasks/get (2026)']();
    if (last.status === 200) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  expect(last).toMatchObject({ status: 200, body: { result: { taskId, status: 'working' } } });
  const started = await requests['tools/call start (2026)']();
  expect(started.body.result).toMatchObject({ resultType: 'task', status: 'working' });
  const v1 = await connectV1(stack.mcpUrl, token);
  expect((await v1.listTools()).tools.length).toBeGreaterThan(0);
  await v1.close();
});

test('cut off by a partition (nothing answers, not even an error), every request gets 503 within the bound and /readyz turns not-ready; it recovers when the partition heals', async () => {
  // Connections are open and warm: the partition leaves them open and silent.
  expect((await requests['tasks/get (2026)']()).status).toBe(200);
  proxy.blackhole();
  try {
    // The bound: the pool's 5 s connect timeout or DATABASE_QUERY_TIMEOUT_MS (5 s), plus
    // the request's own work; well under a client's patience (30 s and more).
    const BOUND_MS = 11_000;
    const answers = await Promise.all(
      Object.entries(requests).map(async ([name, send]) => {
        const t0 = Date.now();
        const r = await send();
        return { name, status: r.status, reason: r.body?.error?.data?.reason, ms: Date.now() - t0 };
      }),
    );
    for (const a of answers) {
      expect({ name: a.name, status: a.status, reason: a.reason }).toEqual({
        name: a.name,
        status: 503,
        reason: 'unavailable',
      });
      expect({ name: a.name, within: a.ms < BOUND_MS }).toEqual({ name: a.name, within: true });
    }
    const t0 = Date.now();
    const ready = await fetch(new URL('/readyz', stack.mcpUrl));
    expect(ready.status).toBe(503);
    expect(Date.now() - t0).toBeLessThan(3000);
  } finally {
    proxy.heal();
  }
  await pollUntil(
    () => requests['tasks/get (2026)'](),
    (r) => r.status === 200,
    20_000,
    250,
    'tasks/get answering again after the partition healed',
  );
}, 60_000);
