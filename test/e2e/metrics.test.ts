import { scrapeAllowed } from '@mtg/metrics';
import { sample } from '../support/metrics-sample.ts';
import { pollUntil } from '../support/poll.ts';
import { freePort, startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire } from '../support/wires.ts';

let stack: Stack;
let workerMetrics: string;
beforeAll(async () => {
  stack = await startStack({ workers: 0, env: { DEMO_STEP_MS: '50' } });
  const port = await freePort();
  workerMetrics = `http://127.0.0.1:${port}/metrics`;
  await stack.addWorker({ WORKER_METRICS_PORT: String(port) });
});
afterAll(async () => {
  await stack?.close();
});

test('the gateway and the worker report tasks, durations, pickup latency, queue depth, denials and HTTP timings', async () => {
  const wire = jobToolsWire(stack.mcpUrl);
  const token = await stack.token('metrics-mia', 'acme');
  const taskId = await wire.start(token, 'generate_report', { report: 'measured' });
  await pollUntil(
    () => wire.get(token, taskId),
    (a) => a.ok && a.value.status === 'completed',
    20_000,
    100,
  );
  // Denials: one with no token at all, one for a task that is not there.
  expect((await fetch(stack.mcpUrl, { method: 'POST' })).status).toBe(401);
  expect((await wire.get(token, 'f'.repeat(32))).ok).toBe(false);

  const gateway = await fetch(`${stack.gatewayUrl}/metrics`);
  expect(gateway.status).toBe(200);
  expect(gateway.headers.get('content-type')).toContain('text/plain');
  const g = await gateway.text();
  expect(
    sample(g, 'mtg_tasks', { status: 'completed', service: 'gateway' }),
  ).toBeGreaterThanOrEqual(1);
  expect(
    sample(g, 'mtg_queue_jobs', { state: 'queued', service: 'gateway' }),
  ).toBeGreaterThanOrEqual(0);
  expect(
    sample(g, 'mtg_denials_total', { layer: 'auth', reason: 'token_missing', service: 'gateway' }),
  ).toBeGreaterThanOrEqual(1);
  expect(
    sample(g, 'mtg_denials_total', { layer: 'task', reason: 'task_not_found', service: 'gateway' }),
  ).toBeGreaterThanOrEqual(1);
  expect(
    sample(g, 'mtg_http_request_duration_seconds_count', {
      route: '/mcp',
      rpc: 'tools/call',
      status: '200',
      service: 'gateway',
    }),
  ).toBeGreaterThanOrEqual(2);
  // Labels carry routes and reasons, never who: no tenant, subject or token in the output.
  expect(g).not.toContain('metrics-mia');

  // The worker observes a task once it has settled it (a moment after the task shows completed).
  const labels = {
    tool: 'generate_report',
    status: 'completed',
    outcome: 'completed',
    worker: 'test-worker-1',
  };
  const w = await pollUntil(
    async () => (await fetch(workerMetrics)).text(),
    (text) => sample(text, 'mtg_task_duration_seconds_count', labels) !== undefined,
    5000,
    50,
  );
  expect(sample(w, 'mtg_task_duration_seconds_count', labels)).toBe(1);
  expect(sample(w, 'mtg_task_duration_seconds_sum', labels)).toBeGreaterThan(0);
  expect(
    sample(w, 'mtg_task_pickup_seconds_count', {
      tool: 'generate_report',
      service: 'worker',
      worker: 'test-worker-1',
    }),
  ).toBe(1);
  expect(
    sample(w, 'mtg_task_runs_total', {
      result: 'settled',
      service: 'worker',
      worker: 'test-worker-1',
    }),
  ).toBe(1);
  expect(
    sample(w, 'mtg_tasks', { status: 'completed', service: 'worker', worker: 'test-worker-1' }),
  ).toBeGreaterThanOrEqual(1);
  expect(w).toContain('mtg_process_cpu_user_seconds_total');
});

test('with METRICS_TOKEN set, /metrics answers only a scraper presenting it', async () => {
  const metricsToken = 'metrics-token-for-tests-0123456789';
  const guarded = await startStack({ workers: 0, env: { METRICS_TOKEN: metricsToken } });
  try {
    const without = await fetch(`${guarded.gatewayUrl}/metrics`);
    expect(without.status).toBe(401);
    const wrong = await fetch(`${guarded.gatewayUrl}/metrics`, {
      headers: { authorization: 'Bearer not-the-metrics-token-at-all' },
    });
    expect(wrong.status).toBe(401);
    const right = await fetch(`${guarded.gatewayUrl}/metrics`, {
      headers: { authorization: `Bearer ${metricsToken}` },
    });
    expect(right.status).toBe(200);
    expect(await right.text()).toContain('mtg_http_request_duration_seconds');
  } finally {
    await guarded.close();
  }
});

test('without a token, only loopback scrapers are answered', () => {
  expect(scrapeAllowed({ remoteAddress: '127.0.0.1' })).toBe(true);
  expect(scrapeAllowed({ remoteAddress: '::1' })).toBe(true);
  expect(scrapeAllowed({ remoteAddress: '::ffff:127.0.0.1' })).toBe(true);
  expect(scrapeAllowed({ remoteAddress: '10.0.0.8' })).toBe(false);
  expect(scrapeAllowed({ remoteAddress: undefined })).toBe(false);
  // With a token, the address no longer matters; the token does.
  expect(scrapeAllowed({ remoteAddress: '127.0.0.1' }, 'a-long-enough-token-value')).toBe(false);
  expect(
    scrapeAllowed(
      { remoteAddress: '10.0.0.8', authorization: 'Bearer a-long-enough-token-value' },
      'a-long-enough-token-value',
    ),
  ).toBe(true);
});
