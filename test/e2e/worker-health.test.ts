// Every worker serves /healthz and /readyz on its own port, metrics on or off: ready means
// the database answers, the queues are subscribed and the worker is not draining; a draining
// worker stays live (a liveness probe must not kill it while it hands its tasks back).
import type { ChildProcess } from 'node:child_process';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { freePort, startStack, type Stack } from '../support/stack.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';
import { jobToolsWire } from '../support/wires.ts';
import { startWorkerProcess, waitForExit } from '../support/worker-process.ts';

let stack: Stack;
let proxy: TcpProxy;
const children: ChildProcess[] = [];

beforeAll(async () => {
  stack = await startStack({ workers: 0, env: { DEMO_STEP_MS: '1500' } });
  const db = new URL(stack.db.url);
  proxy = await startTcpProxy({ host: db.hostname, port: Number(db.port || 5432) });
});
afterAll(async () => {
  for (const c of children) {
    c.kill('SIGKILL');
    await waitForExit(c);
  }
  await proxy?.up().catch(() => {});
  await stack?.close();
  await proxy?.close();
});

const probe = async (url: string) => {
  const res = await fetch(url);
  return { status: res.status, body: (await res.json()) as Record<string, any> };
};

test('a worker process without metrics serves /healthz and /readyz on WORKER_HEALTH_PORT', async () => {
  const port = await freePort();
  const child = await startWorkerProcess(stack, 'health-process', {
    WORKER_HEALTH_PORT: String(port),
  });
  children.push(child);
  const base = `http://127.0.0.1:${port}`;
  expect(await probe(`${base}/healthz`)).toEqual({ status: 200, body: { ok: true } });
  expect(await probe(`${base}/readyz`)).toEqual({
    status: 200,
    body: { ok: true, checks: { database: true, subscribed: true, draining: false } },
  });
  expect((await fetch(`${base}/metrics`)).status).toBe(404);
  child.kill('SIGTERM');
  await waitForExit(child);
});

test('readiness fails while the database is unreachable and comes back with it; liveness holds', async () => {
  const worker = await stack.addWorker({
    WORKER_ID: 'health-outage',
    DATABASE_URL: proxy.via(stack.db.url),
  });
  const base = worker.healthUrl()!;
  expect((await probe(`${base}/readyz`)).status).toBe(200);
  await proxy.down();
  const down = await probe(`${base}/readyz`);
  expect(down.status).toBe(503);
  expect(down.body.checks).toMatchObject({ database: false, subscribed: true, draining: false });
  expect((await probe(`${base}/healthz`)).status).toBe(200);
  await proxy.up();
  await pollUntil(
    () => probe(`${base}/readyz`),
    (r) => r.status === 200,
    10_000,
    100,
  );
  await worker.stop();
});

test('a draining worker is not ready but stays live until it has handed its task back', async () => {
  const worker = await stack.addWorker({ WORKER_ID: 'health-drain', SHUTDOWN_GRACE_MS: '20000' });
  const base = worker.healthUrl()!;
  const token = await stack.token('olga', 'acme');
  const taskId = await jobToolsWire(stack.mcpUrl).start(token, 'generate_report', {
    report: 'drain-probe',
  });
  await pollUntil(
    () =>
      sql(stack.db.url, `SELECT 1 FROM audit.events WHERE task_id = $1 AND type = 'task.started'`, [
        taskId,
      ]),
    (rows) => rows.length === 1,
    10_000,
    50,
  );
  const stopped = worker.stop();
  const during = await probe(`${base}/readyz`);
  expect(during.status).toBe(503);
  expect(during.body.checks).toMatchObject({ draining: true });
  expect((await probe(`${base}/healthz`)).status).toBe(200);
  await stopped;
  await expect(fetch(`${base}/healthz`)).rejects.toThrow();
});
