// The operations metrics: database pools, audit append latency, chain-lock waiters, the
// signed checkpoint's age and the last verification, per-queue depth, token exchanges,
// worker slots and per-target call outcomes, as a scraper sees them after real traffic.
import pg from 'pg';
import { sample } from '../support/metrics-sample.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { freePort, startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire } from '../support/wires.ts';

let stack: Stack;
let workerMetrics: string;
const holders: pg.Client[] = [];

beforeAll(async () => {
  stack = await startStack({ workers: 0, env: { DEMO_STEP_MS: '20' } });
  const port = await freePort();
  workerMetrics = `http://127.0.0.1:${port}/metrics`;
  await stack.addWorker({ WORKER_METRICS_PORT: String(port), WORKER_CONCURRENCY: '7' });
});
afterAll(async () => {
  for (const c of holders) await c.end().catch(() => {});
  await stack?.close();
});

const scrape = async (url: string) => (await fetch(url)).text();

test('the chain lock, the checkpoint age and the last verification are read from the database', async () => {
  await sql(
    stack.db.url,
    `INSERT INTO audit.checkpoints (seq, hash, signed_at, key_id, jws)
     VALUES (1, repeat('a', 64), now() - interval '100 seconds', 'k', 'x.y.z')`,
  );
  await sql(stack.db.url, `SELECT audit.record_verification('verify', false, 1, 'hash_mismatch')`);
  // One session holds the chain lock, another waits for it.
  const holder = new pg.Client({ connectionString: stack.db.url });
  const waiter = new pg.Client({ connectionString: stack.db.url });
  holders.push(holder, waiter);
  await holder.connect();
  await waiter.connect();
  await holder.query('BEGIN');
  await holder.query('SELECT audit.lock_chain()');
  await waiter.query('BEGIN');
  const waiting = waiter.query('SELECT audit.lock_chain()');
  await pollUntil(
    () => sql(stack.db.url, `SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`),
    (rows) => rows.length === 1,
    5000,
    20,
  );
  let g: string;
  try {
    g = await scrape(`${stack.gatewayUrl}/metrics`);
  } finally {
    await holder.query('COMMIT');
    await waiting;
    await waiter.query('COMMIT');
  }
  expect(sample(g, 'mtg_audit_chain_lock_waiters')).toBe(1);
  expect(sample(g, 'mtg_audit_chain_lock_wait_seconds')).toBeGreaterThanOrEqual(0);

  // A tenant's chain lock is its row of audit.chains: two appenders of one tenant, the second
  // waiting, count as one waiter too (appenders of other tenants do not wait at all).
  const body = JSON.stringify({ tenant: 'metrics-lock' });
  await sql(stack.db.url, `SELECT audit.append('task.created', $1)`, [body]);
  await holder.query('BEGIN');
  await holder.query(`SELECT audit.append('task.created', $1)`, [body]);
  await waiter.query('BEGIN');
  const queued = waiter.query(`SELECT audit.append('task.created', $1)`, [body]);
  await pollUntil(
    () =>
      sql(stack.db.url, `SELECT 1 FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted`),
    (rows) => rows.length === 1,
    5000,
    20,
  );
  let r: string;
  try {
    await new Promise((done) => setTimeout(done, 5100)); // past the gauges' 5 s cache
    r = await scrape(`${stack.gatewayUrl}/metrics`);
  } finally {
    await holder.query('COMMIT');
    await queued;
    await waiter.query('COMMIT');
  }
  expect(sample(r, 'mtg_audit_chain_lock_waiters')).toBe(1);
  expect(sample(g, 'mtg_audit_checkpoint_age_seconds')).toBeGreaterThanOrEqual(99);
  expect(sample(g, 'mtg_audit_verification_ok')).toBe(0);
  expect(sample(g, 'mtg_audit_verification_age_seconds')).toBeGreaterThanOrEqual(0);
});

test('a task shows in the pools, the audit append latency, the exchanges, the queues, the slots and the target calls', async () => {
  const wire = jobToolsWire(stack.mcpUrl);
  const token = await stack.token('ops-metrics', 'acme');
  const taskId = await wire.start(token, 'bulk_update_records', {
    collection: 'ops',
    count: 3,
    patch: { a: 1 },
  });
  await pollUntil(
    () => wire.get(token, taskId),
    (a) => a.ok && a.value.status === 'completed',
    20_000,
    50,
  );
  const g = await scrape(`${stack.gatewayUrl}/metrics`);
  expect(sample(g, 'mtg_db_pool_connections', { state: 'total' })).toBeGreaterThan(0);
  expect(sample(g, 'mtg_db_pool_connections', { state: 'waiting' })).toBe(0);
  expect(sample(g, 'mtg_audit_append_seconds_count')).toBeGreaterThan(0);
  expect(sample(g, 'mtg_queue_depth', { tool: 'bulk_update_records', state: 'queued' })).toBe(0);
  expect(sample(g, 'mtg_queue_depth', { tool: 'generate_report', state: 'active' })).toBe(0);
  // The gateway exchanged the caller's token for the task's delegation.
  expect(
    sample(g, 'mtg_token_exchange_duration_seconds_count', { outcome: 'ok' }),
  ).toBeGreaterThanOrEqual(1);

  const w = await scrape(workerMetrics);
  expect(sample(w, 'mtg_worker_slots', { state: 'total' })).toBe(7);
  expect(sample(w, 'mtg_worker_slots', { state: 'busy' })).toBe(0);
  expect(sample(w, 'mtg_db_pool_connections', { state: 'total' })).toBeGreaterThan(0);
  expect(
    sample(w, 'mtg_token_exchange_duration_seconds_count', { outcome: 'ok' }),
  ).toBeGreaterThanOrEqual(1);
  expect(
    sample(w, 'mtg_target_requests_total', { target: 'downstream', outcome: '2xx' }),
  ).toBeGreaterThanOrEqual(1);
  expect(
    sample(w, 'mtg_target_request_duration_seconds_count', { target: 'downstream' }),
  ).toBeGreaterThanOrEqual(1);
  expect(w).toContain('mtg_queue_depth{tool="bulk_update_records"');
});
