// mtg_task_duration_seconds observes every task end exactly once, in the process that ended
// it: a worker's run, that worker's deadline sweep, or the gateway (a cancel or revocation of
// a task no live worker holds). One worker that runs one task at a time is kept busy, so the
// other tasks wait in the queue, unheld, for the sweep or the gateway to end them.
import { sample } from '../support/metrics-sample.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { freePort, startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire, type Wire } from '../support/wires.ts';

const TENANT = 'acme';
const DURATION = 'mtg_task_duration_seconds_count';
let stack: Stack;
let wire: Wire;
let workerMetrics: string;
let blocker: { token: string; taskId: string };

const scrapeWorker = async () => (await fetch(workerMetrics)).text();
const scrapeGateway = async () => (await fetch(`${stack.gatewayUrl}/metrics`)).text();
const report = (status: string, outcome: string) => ({
  tool: 'generate_report',
  status,
  outcome,
});

async function queuedReport(sub: string): Promise<{ token: string; taskId: string }> {
  const token = await stack.token(sub, TENANT);
  return { token, taskId: await wire.start(token, 'generate_report', { report: sub }) };
}

beforeAll(async () => {
  // No approval: the blocker's 100,000 records would otherwise wait for a second person.
  stack = await startStack({
    workers: 0,
    env: { DEMO_STEP_MS: '200', DEMO_APPROVAL_ABOVE: '1000000' },
  });
  wire = jobToolsWire(stack.mcpUrl);
  const port = await freePort();
  workerMetrics = `http://127.0.0.1:${port}/metrics`;
  await stack.addWorker({ WORKER_METRICS_PORT: String(port), WORKER_CONCURRENCY: '1' });
  // 200 batches of 200 ms: the worker is busy with this for the whole file.
  const token = await stack.token('busy-bea', TENANT);
  const taskId = await wire.start(token, 'bulk_update_records', {
    collection: 'busy',
    count: 100_000,
    patch: { touched: true },
  });
  blocker = { token, taskId };
  const [held] = await pollUntil(
    () => sql(stack.db.url, 'SELECT lease_owner FROM app.tasks WHERE id = $1', [taskId]),
    (rows) => rows[0]?.lease_owner != null,
    10_000,
  );
  expect(held.lease_owner).toBe('test-worker-1');
});
afterAll(async () => {
  await stack?.close();
});

test('a task the deadline sweep ends while nobody runs it is observed once, by the worker whose sweep ended it', async () => {
  const { taskId } = await queuedReport('late-lea');
  await sql(stack.db.url, 'UPDATE app.tasks SET deadline = now() WHERE id = $1', [taskId]);
  const text = await pollUntil(
    scrapeWorker,
    (t) => sample(t, DURATION, report('failed', 'deadline')) !== undefined,
    10_000,
    100,
  );
  expect(sample(text, DURATION, report('failed', 'deadline'))).toBe(1);
  const [row] = await sql(stack.db.url, 'SELECT status, ended_by FROM app.tasks WHERE id = $1', [
    taskId,
  ]);
  // Ended by the sweep (no worker named), not by a run that noticed the deadline.
  expect(row).toMatchObject({ status: 'failed', ended_by: { path: 'deadline' } });
  expect(row.ended_by.worker).toBeUndefined();
});

test('a task cancelled or revoked while nobody runs it is observed once, by the gateway that ended it', async () => {
  const cancelled = await queuedReport('cancel-cal');
  expect((await wire.cancel(cancelled.token, cancelled.taskId)).ok).toBe(true);
  // Revoked through the IdP's security events, and by a tenant administrator.
  await queuedReport('disabled-dee');
  await stack.idpUser('disable', 'disabled-dee', TENANT);
  await queuedReport('revoked-rex');
  const admin = await stack.token('admin-ann', TENANT, { scope: 'tasks:admin' });
  const revoked = await fetch(`${stack.gatewayUrl}/admin/principals/revoke`, {
    method: 'POST',
    headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
    body: JSON.stringify({ subject: 'revoked-rex' }),
  });
  expect(revoked.status).toBe(200);

  const g = await scrapeGateway();
  expect(sample(g, DURATION, { ...report('cancelled', 'cancelled'), service: 'gateway' })).toBe(1);
  expect(sample(g, DURATION, { ...report('cancelled', 'revoked'), service: 'gateway' })).toBe(2);
});

test('a task ended elsewhere is not observed again when its worker later finds it ended', async () => {
  // Free the worker: it ends its own task (observed there) and then takes the queued jobs of
  // the tasks ended above, finding each already ended.
  expect((await wire.cancel(blocker.token, blocker.taskId)).ok).toBe(true);
  const w = await pollUntil(
    scrapeWorker,
    (t) => (sample(t, 'mtg_task_runs_total', { result: 'gone' }) ?? 0) >= 4,
    20_000,
    100,
  );
  expect(sample(w, 'mtg_task_runs_total', { result: 'gone' })).toBe(4);
  expect(
    sample(w, DURATION, { tool: 'bulk_update_records', status: 'cancelled', outcome: 'cancelled' }),
  ).toBe(1);
  expect(sample(w, DURATION, report('failed', 'deadline'))).toBe(1);
  expect(sample(w, DURATION, report('cancelled', 'cancelled'))).toBeUndefined();
  expect(sample(w, DURATION, report('cancelled', 'revoked'))).toBeUndefined();
  // Five tasks ended, five observations across the two processes.
  const total = (sample(w, DURATION) ?? 0) + (sample(await scrapeGateway(), DURATION) ?? 0);
  const [ended] = await sql(
    stack.db.url,
    'SELECT count(*)::int AS n FROM app.tasks WHERE ended_at IS NOT NULL',
  );
  expect(ended.n).toBe(5);
  expect(total).toBe(5);
});
