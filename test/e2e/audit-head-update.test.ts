// One tenant's append moves its chain's head with one UPDATE per event (migration 250): the
// head it follows comes back from that UPDATE, the time is read after any wait for the chain,
// and the events link exactly as the locking path links them.
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';

const APPEND = 'SELECT audit.append_many($1::text[], $2::text[], NULL::uuid[], false) AS seqs';
const body = (n: number, tenant = 'acme') =>
  JSON.stringify({ data: { n }, subject: 'nia', tenant });

let db: TestDatabase;
beforeEach(async () => {
  db = await createTestDatabase();
});
afterEach(async () => {
  await db?.drop();
});

/** Each event's prev_hash is its predecessor's hash, and its hash is the chained formula's. */
async function brokenLinks(url: string): Promise<unknown[]> {
  return sql(
    url,
    `SELECT seq FROM (
       SELECT seq, prev_hash, hash, lag(hash) OVER w AS before, lag(seq) OVER w AS seq_before,
              lag(occurred_at) OVER w AS at_before, occurred_at,
              audit.event_hash(chain_id, seq, occurred_at, type, prev_hash, body) AS computed
         FROM audit.events WHERE tenant = 'acme' WINDOW w AS (ORDER BY seq)) e
      WHERE hash <> computed
         OR (seq_before IS NOT NULL AND (prev_hash <> before OR seq <> seq_before + 1
                                         OR occurred_at < at_before))`,
  );
}

test('after its first event, a tenant appends by moving the head: the events link as before', async () => {
  // The first event creates the chain (the locking path); the rest take the UPDATE.
  await sql(db.url, APPEND, [['task.created'], [body(1)]]);
  for (let n = 2; n <= 4; n++) await sql(db.url, APPEND, [['task.status_read'], [body(n)]]);
  const [two] = await sql(db.url, APPEND, [
    ['task.step_completed', 'task.completed'],
    [body(5), body(6)],
  ]);
  expect(two.seqs.map(Number)).toEqual([5, 6]);

  const [head] = await sql(
    db.url,
    `SELECT c.head_seq::int, c.head_hash = e6.hash AS head_is_last,
            c.prev_head_hash = e5.hash AS prev_is_fifth, c.prev_head_at = e5.occurred_at AS prev_at
       FROM audit.chains c
       JOIN audit.events e6 ON e6.chain_id = c.chain_id AND e6.seq = 6
       JOIN audit.events e5 ON e5.chain_id = c.chain_id AND e5.seq = 5
      WHERE c.tenant = 'acme'`,
  );
  // prev_head_* hold the head the last event followed: set only by the UPDATE path.
  expect(head).toEqual({ head_seq: 6, head_is_last: true, prev_is_fifth: true, prev_at: true });
  expect(await brokenLinks(db.url)).toEqual([]);
});

test('an append that waited for the chain takes its time after the wait, behind the event it waited for', async () => {
  await sql(db.url, APPEND, [['task.created'], [body(1)]]);
  const holder = new pg.Client({ connectionString: db.url });
  const waiter = new pg.Client({ connectionString: db.url });
  await Promise.all([holder.connect(), waiter.connect()]);
  try {
    await holder.query('BEGIN');
    await holder.query(APPEND, [['task.started'], [body(2)]]);
    const { rows: pids } = await waiter.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const waiting = waiter.query<{ seqs: string[] }>(APPEND, [['task.status_read'], [body(3)]]);
    // Its call has reached the chain's lock and waits there (no fixed sleep: on a loaded
    // machine the call may take a while to arrive).
    await pollUntil(
      async () =>
        (
          await holder.query<{ wait: string | null }>(
            'SELECT wait_event_type AS wait FROM pg_stat_activity WHERE pid = $1',
            [pids[0]!.pid],
          )
        ).rows[0]?.wait,
      (wait) => wait === 'Lock',
      30_000,
      20,
      "the second append's wait for the chain",
    );
    // Kept as text: a Date holds milliseconds, and the commit and the waiter's clock read can
    // fall in the same millisecond as this one; PostgreSQL compares the microseconds.
    const { rows } = await holder.query<{ at: string }>('SELECT clock_timestamp()::text AS at');
    const at = rows[0]!.at;
    await holder.query('COMMIT');
    expect((await waiting).rows[0]!.seqs.map(Number)).toEqual([3]);
    const [third] = await sql(
      db.url,
      `SELECT occurred_at > $1::timestamptz AS after_wait, occurred_at::text AS at
         FROM audit.events WHERE tenant = 'acme' AND seq = 3`,
      [at],
    );
    // Read after the holder committed, not when the waiter's call arrived (before the wait).
    // (Both times go in the received object, so a failure shows them.)
    expect({ committed_after: at, ...third }).toMatchObject({ after_wait: true });
  } finally {
    await Promise.all([holder.end(), waiter.end()]);
  }
  expect(await brokenLinks(db.url)).toEqual([]);
});

test('several tenants in one call, or a retry with keys, take the locking path, and both paths share a chain', async () => {
  await sql(db.url, APPEND, [['task.created'], [body(1)]]);
  await sql(db.url, APPEND, [
    ['task.created', 'task.created'],
    [body(2), body(1, 'globex')],
  ]);
  await sql(db.url, APPEND, [['task.started'], [body(3)]]);
  await sql(
    db.url,
    'SELECT audit.append_many($1::text[], $2::text[], ARRAY[gen_random_uuid()], true)',
    [['task.status_read'], [body(4)]],
  );
  await sql(db.url, APPEND, [['task.completed'], [body(5)]]);
  const seqs = await sql(
    db.url,
    `SELECT seq::int FROM audit.events WHERE tenant = 'acme' ORDER BY seq`,
  );
  expect(seqs.map((r) => r.seq)).toEqual([1, 2, 3, 4, 5]);
  expect(await brokenLinks(db.url)).toEqual([]);
});
