import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRemoteJWKSet } from 'jose';
import { createPool, ROLES, type Pool } from '@mtg/db';
import { createLogger } from '@mtg/log';
import { createApp as createDownstreamApp } from '../../apps/downstream/src/create-app.ts';
import {
  createFaults,
  type FaultCommand,
  type Faults,
} from '../../apps/downstream/src/api/faults.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { freePort, startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire } from '../support/wires.ts';

// The stack's own downstream stays healthy; the worker here talks to a second instance of the
// real downstream app (same database, same token audience) with fault injection mounted.
let stack: Stack;
let pool: Pool;
let server: http.Server;
let faults: Faults;
let faultyUrl: string;
let metricsUrl: string;
const wire = () => jobToolsWire(stack.mcpUrl);

beforeAll(async () => {
  stack = await startStack({ workers: 0, env: { DEMO_STEP_MS: '50' } });
  pool = createPool({ connectionString: stack.db.url, role: ROLES.downstream });
  faults = createFaults();
  const app = createDownstreamApp({
    pool,
    logger: createLogger('faulty-downstream', { silent: !process.env.TEST_LOGS }),
    auth: {
      keys: createRemoteJWKSet(new URL(`${stack.issuer}/jwks`)),
      issuer: stack.issuer,
      audience: stack.downstreamUrl,
    },
    faults,
  });
  server = http.createServer(app);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  faultyUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const metricsPort = await freePort();
  metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
  await stack.addWorker({
    DOWNSTREAM_URL: faultyUrl,
    DOWNSTREAM_RESOURCE: stack.downstreamUrl,
    DOWNSTREAM_ATTEMPT_TIMEOUT_MS: '300',
    DOWNSTREAM_RETRIES: '2',
    DOWNSTREAM_BACKOFF_INITIAL_MS: '20',
    DOWNSTREAM_BACKOFF_MAX_MS: '100',
    DOWNSTREAM_BREAKER_THRESHOLD: '3',
    DOWNSTREAM_BREAKER_COOLDOWN_MS: '400',
    WORKER_METRICS_PORT: String(metricsPort),
  });
});
afterAll(async () => {
  await stack?.close();
  await new Promise<void>((r) => {
    server?.close(() => r());
    server?.closeAllConnections();
  });
  await pool?.end();
});
afterEach(async () => {
  await setFaults({ mode: 'ok' });
});

async function setFaults(command: FaultCommand) {
  const r = await fetch(`${faultyUrl}/_faults`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(command),
  });
  expect(r.status).toBe(200);
}

async function circuitGauge(): Promise<number | undefined> {
  const text = await (await fetch(metricsUrl)).text();
  const line = text
    .split('\n')
    .find(
      (l) =>
        l.startsWith('mtg_downstream_circuit_state{') && l.includes(`downstream="${faultyUrl}"`),
    );
  return line ? Number(line.split(' ').pop()) : undefined;
}

async function status(token: string, taskId: string) {
  const a = await wire().get(token, taskId);
  if (!a.ok) throw new Error(a.error);
  return a.value as { status: string; statusMessage?: string };
}

test('a failing downstream: the task retries with backoff, says the circuit is open, then completes with every write once', async () => {
  await setFaults({ mode: 'fail', status: 503 });
  const token = await stack.token('fran', 'acme');
  const taskId = await wire().start(token, 'bulk_update_records', {
    collection: 'outage',
    count: 1500,
    patch: { z: 1 },
  });

  const waiting = await pollUntil(
    () => status(token, taskId),
    (s) => /circuit open/.test(s.statusMessage ?? ''),
    15_000,
    50,
  );
  expect(waiting.status).toBe('working');
  expect(waiting.statusMessage).toContain(
    `waiting: downstream ${faultyUrl} unavailable (circuit open)`,
  );
  expect(await circuitGauge()).toBe(1);

  // While the circuit is open the worker holds calls back: the downstream sees a trickle of
  // probes, not a hot loop, and the task neither fails nor lands anything.
  const before = faults.state().seen;
  expect(before).toBeGreaterThanOrEqual(3);
  await new Promise((r) => setTimeout(r, 1200));
  const probes = faults.state().seen - before;
  expect(probes).toBeLessThan(20);
  expect((await status(token, taskId)).status).toBe('working');
  expect(await stack.writes(taskId)).toEqual([]);

  await setFaults({ mode: 'ok' });
  const done = await pollUntil(
    () => status(token, taskId),
    (s) => s.status !== 'working',
    20_000,
    100,
  );
  expect(done.status).toBe('completed');
  expect(await circuitGauge()).toBe(0);
  const result = await wire().result(token, taskId);
  expect(result).toMatchObject({
    ok: true,
    value: { collection: 'outage', updated: 1500, batches: 3 },
  });

  const keys = (await stack.writes(taskId)).map((w) => w.idempotencyKey);
  expect(keys.sort()).toEqual([0, 1, 2].map((i) => `${taskId}:batch:${i}`));
  // Waiting did not cost attempts: the run kept its lease through the outage.
  const [row] = await sql(stack.db.url, 'SELECT attempts FROM app.tasks WHERE id = $1', [taskId]);
  expect(row.attempts).toBe(1);
});

test('a hanging downstream: per-attempt timeouts fire, the task waits, and it completes after recovery', async () => {
  await setFaults({ mode: 'hang' });
  const token = await stack.token('fran', 'acme');
  const taskId = await wire().start(token, 'provision_test_environment', {
    branch: 'hang',
    services: ['api', 'web'],
  });

  const waiting = await pollUntil(
    () => status(token, taskId),
    (s) => /unavailable \((timed out|circuit open)\)/.test(s.statusMessage ?? ''),
    15_000,
    50,
  );
  expect(waiting.status).toBe('working');
  expect(faults.state().faulted).toBeGreaterThanOrEqual(3);
  // Each timed-out attempt was abandoned by the worker: the downstream holds none of them.
  await pollUntil(
    async () => faults.heldRequests(),
    (n) => n === 0,
    5000,
    50,
  );
  expect(faults.heldRequests()).toBe(0);

  await setFaults({ mode: 'ok' });
  const done = await pollUntil(
    () => status(token, taskId),
    (s) => s.status !== 'working',
    20_000,
    100,
  );
  expect(done.status).toBe('completed');
  const keys = (await stack.writes(taskId)).map((w) => w.idempotencyKey);
  expect(new Set(keys).size).toBe(keys.length);
  expect(keys.sort()).toEqual(
    ['create-namespace', 'apply-permissions', 'deploy:api', 'deploy:web', 'seed-database']
      .map((s) => `${taskId}:${s}`)
      .sort(),
  );
});

test('a few failures are absorbed by retries: the task completes without ever waiting', async () => {
  await setFaults({ mode: 'fail', status: 502, count: 2 });
  const token = await stack.token('fran', 'acme');
  const taskId = await wire().start(token, 'generate_report', { report: 'flaky' });
  const done = await pollUntil(
    () => status(token, taskId),
    (s) => s.status !== 'working',
    20_000,
    100,
  );
  expect(done.status).toBe('completed');
  expect(faults.state().faulted).toBe(2);
  const result = await wire().result(token, taskId);
  expect(result.ok).toBe(true);
});

test('cancelling a task that waits for a broken downstream stops it at once; nothing lands', async () => {
  await setFaults({ mode: 'fail', status: 503 });
  const token = await stack.token('fran', 'acme');
  const taskId = await wire().start(token, 'bulk_update_records', {
    collection: 'cancel-wait',
    count: 10,
    patch: { z: 2 },
  });
  await pollUntil(
    () => status(token, taskId),
    (s) => /unavailable/.test(s.statusMessage ?? ''),
    15_000,
    50,
  );
  const answer = await wire().cancel(token, taskId);
  expect(answer).toMatchObject({ ok: true, value: { status: 'cancelled' } });
  await setFaults({ mode: 'ok' });
  await new Promise((r) => setTimeout(r, 600));
  expect(await stack.writes(taskId)).toEqual([]);
});

test('a downstream that refuses a request (4xx) is not retried: the task completes with a tool error', async () => {
  await setFaults({ mode: 'fail', status: 422 });
  const token = await stack.token('fran', 'acme');
  const taskId = await wire().start(token, 'generate_report', { report: 'refused' });
  const done = await pollUntil(
    () => status(token, taskId),
    (s) => s.status !== 'working',
    20_000,
    100,
  );
  expect(done.status).toBe('completed');
  expect(faults.state().seen).toBe(1);
  const result = await wire().result(token, taskId);
  expect(result).toMatchObject({ ok: false });
  expect((result as { error: string }).error).toContain('422');
});
