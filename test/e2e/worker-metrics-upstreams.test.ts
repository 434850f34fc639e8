import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { freePort, startStack, type Stack } from '../support/stack.ts';
import { planUpstreams } from '../support/upstreams.ts';

// `npm start` always configures the demo upstream and the Kubernetes ConfigMap always sets
// WORKER_METRICS_PORT: a worker must start with both, and count its upstream's queue.
let stack: Stack;
let upstreams: Awaited<ReturnType<typeof planUpstreams>>;

beforeAll(async () => {
  upstreams = await planUpstreams({ demoStepMs: 100 });
  await upstreams.start();
  stack = await startStack({
    workers: 0,
    env: { UPSTREAMS_FILE: upstreams.file },
    onIssuer: (issuer) => upstreams.trust(issuer),
  });
});
afterAll(async () => {
  await stack?.close();
  await upstreams?.close();
});

test('a worker with metrics on and an upstream task tool configured starts and serves /metrics', async () => {
  // The worker serves the upstream task tools the gateway stored in the catalogue.
  await pollUntil(
    () => sql(stack.db.url, `SELECT name FROM app.upstream_tools`),
    (rows) => rows.some((r) => r.name === 'demo.export_ledger'),
    15_000,
  );
  const port = await freePort();
  await stack.addWorker({ WORKER_METRICS_PORT: String(port) });
  const response = await fetch(`http://127.0.0.1:${port}/metrics`);
  expect(response.status).toBe(200);
  const text = await response.text();
  expect(text).toMatch(
    /mtg_queue_depth\{[^}]*tool="demo\.export_ledger"[^}]*queue="upstream\.demo"/,
  );
});
