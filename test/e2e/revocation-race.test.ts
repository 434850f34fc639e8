import pg from 'pg';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire, type Wire } from '../support/wires.ts';

// Starts in flight while an administrator revokes their user: none may commit after the
// revocation unless the revocation also stops it. No worker runs here, so a task the
// revocation missed would stay `working` for good.
//
// To make the interleavings certain instead of likely, the test holds a lock the starts need
// at a chosen point (the tenant's active-task cap lock, or the audit chain's lock), lets the
// starts pile up behind it, revokes, and only then lets them go on.

// A tenant's audit chain lock is its row of audit.chains (migration 080).
const AUDIT_CHAIN_LOCK = 'SELECT 1 FROM audit.chains WHERE tenant = $1 FOR UPDATE';
const CAP_LOCK = `SELECT pg_advisory_xact_lock(hashtext('mtg-cap:' || $1))`;

let stack: Stack;
let wire: Wire;
beforeAll(async () => {
  stack = await startStack({ workers: 0 });
  wire = jobToolsWire(stack.mcpUrl);
});
afterAll(async () => {
  await stack?.close();
});

async function revoke(tenant: string, subject: string) {
  const adminToken = await stack.token(`${tenant}-admin`, tenant, { scope: 'tasks:admin' });
  const r = await fetch(`${stack.gatewayUrl}/admin/principals/revoke`, {
    method: 'POST',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ subject }),
  });
  return { status: r.status, body: (await r.json()) as { cancelledTasks: string[] } };
}

/** A session of the test's own holding `lock` until release(). */
async function hold(lock: string, values: unknown[] = []) {
  const client = new pg.Client({ connectionString: stack.db.url });
  await client.connect();
  await client.query('BEGIN');
  await client.query(lock, values);
  return {
    async release() {
      await client.query('COMMIT');
      await client.end();
    },
  };
}

/**
 * Sessions of this database waiting for a lock: the cap's advisory lock, or a chain's row (a
 * row lock waits for the holder's transaction, or for the tuple lock the first waiter holds).
 */
async function advisoryWaiters(): Promise<number> {
  const [{ n }] = await sql(
    stack.db.url,
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock'
        AND wait_event IN ('advisory', 'transactionid', 'tuple')`,
  );
  return n;
}

async function untilWaiters(n: number) {
  expect(await pollUntil(advisoryWaiters, (w) => w >= n, 15_000, 20)).toBeGreaterThanOrEqual(n);
}

/** Every task of the principal, with how it ended. */
const tasksOf = (tenant: string, subject: string) =>
  sql(
    stack.db.url,
    `SELECT id, status, outcome FROM app.tasks WHERE tenant = $1 AND subject = $2 ORDER BY id`,
    [tenant, subject],
  );

const starts = (token: string, n: number, tag: string) =>
  Promise.allSettled(
    Array.from({ length: n }, (_, i) =>
      wire.start(token, 'generate_report', { report: `${tag}-${i}` }),
    ),
  );

test('starts that reach their transaction after a revocation committed are refused and leave nothing', async () => {
  const token = await stack.token('rita', 'race1');
  // The starts insert their rows and then wait for the tenant's cap lock.
  const cap = await hold(CAP_LOCK, ['race1']);
  const inFlight = starts(token, 6, 'after');
  await untilWaiters(6);

  const revoked = await revoke('race1', 'rita');
  expect(revoked).toEqual({ status: 200, body: expect.objectContaining({ cancelledTasks: [] }) });
  await cap.release();
  const outcomes = await inFlight;

  expect(outcomes.map((o) => o.status)).toEqual(Array(6).fill('rejected'));
  expect(await tasksOf('race1', 'rita')).toEqual([]);
  const denied = await sql(
    stack.db.url,
    `SELECT reason, body::jsonb -> 'data' ->> 'verb' AS verb FROM audit.events
      WHERE type = 'task.denied' AND tenant = 'race1' AND subject = 'rita'`,
  );
  // One caller's repeats of one denial fold into its first event (and a summary with the
  // count when the window closes; docs/tasks.md, "Repeated denials fold").
  expect(denied).toEqual([{ reason: 'principal_revoked', verb: 'start' }]);
});

test('a revocation that starts while a start is committing waits for it and stops it', async () => {
  const token = await stack.token('ross', 'race2');
  // The first start passes every check and waits for the audit chain, the last step before
  // COMMIT; the others wait behind it for the tenant's cap lock.
  // The tenant's chain exists once it has an event; then its row is the lock to hold.
  await sql(stack.db.url, `SELECT audit.append('task.status_read', '{"tenant":"race2"}')`);
  const chain = await hold(AUDIT_CHAIN_LOCK, ['race2']);
  const inFlight = starts(token, 6, 'during');
  await untilWaiters(6);
  const revoking = revoke('race2', 'ross');
  await untilWaiters(7);
  await chain.release();

  const outcomes = await inFlight;
  const { status, body } = await revoking;
  expect(status).toBe(200);
  const ids = outcomes
    .filter((o) => o.status === 'fulfilled')
    .map((o) => o.value)
    .sort();
  // The one committing when the revocation came, at least, got through, and was stopped.
  expect(ids.length).toBeGreaterThanOrEqual(1);
  expect([...body.cancelledTasks].sort()).toEqual(ids);
  expect(await tasksOf('race2', 'ross')).toEqual(
    ids.map((id) => ({ id, status: 'cancelled', outcome: 'revoked' })),
  );
  // The rest waited for the revocation and were refused.
  const [{ n }] = await sql(
    stack.db.url,
    `SELECT count(*)::int AS n FROM audit.events WHERE type = 'task.denied'
        AND reason = 'principal_revoked' AND tenant = 'race2' AND subject = 'ross'`,
  );
  // (One event for all of them: repeated denials fold, docs/tasks.md.)
  expect(n).toBe(ids.length < 6 ? 1 : 0);
  // Every task.created precedes principal.revoked in the chain.
  const events = await sql(
    stack.db.url,
    `SELECT type FROM audit.events WHERE tenant = 'race2' AND subject = 'ross'
        AND type IN ('task.created', 'principal.revoked') ORDER BY seq`,
  );
  expect(events.map((e) => e.type)).toEqual([
    ...Array(ids.length).fill('task.created'),
    'principal.revoked',
  ]);
});

test('twelve starts racing a revocation: each is refused, or committed before it and stopped by it', async () => {
  const token = await stack.token('rudy', 'race3');
  const inFlight = starts(token, 12, 'race');
  await new Promise((r) => setTimeout(r, 30));
  const { body } = await revoke('race3', 'rudy');
  const outcomes = await inFlight;

  const tasks = await tasksOf('race3', 'rudy');
  expect(tasks.filter((t) => t.status !== 'cancelled' || t.outcome !== 'revoked')).toEqual([]);
  expect([...body.cancelledTasks].sort()).toEqual(tasks.map((t) => t.id));
  const started = outcomes.filter((o) => o.status === 'fulfilled');
  expect(started.length).toBe(tasks.length);
});
