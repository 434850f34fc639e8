// A failover leaves pooled connections that can no longer serve: on the demoted old primary
// (every write refused with 25006, read-only transaction) or cut off (nothing answers). Such
// a connection is an outage, never a statement bug, and the pool must not hand it out again.
import { createPool, databaseFailureOf, withTransaction } from '../src/index.ts';

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

test('a read-only server (a demoted primary) and an unanswered statement are outages', () => {
  expect(
    databaseFailureOf(
      Object.assign(new Error('cannot execute INSERT in a read-only transaction'), {
        code: '25006',
        severity: 'ERROR',
      }),
    ),
  ).toEqual({ code: 'database_unavailable' });
  expect(databaseFailureOf(new Error('Query read timeout'))).toEqual({
    code: 'database_unavailable',
  });
  // A standby (or a node still promoting) asked to read an UNLOGGED table, as a poll's read
  // of its status-read mark is: seen as a 500 in the failover suite before it was an outage.
  expect(
    databaseFailureOf(
      Object.assign(new Error('cannot access temporary or unlogged relations during recovery'), {
        code: '0A000',
        severity: 'ERROR',
      }),
    ),
  ).toEqual({ code: 'database_unavailable' });
});

test('a connection that answered "read-only" is dropped when released, whoever checked it out', async () => {
  const pool = createPool({ connectionString: url, max: 1 });
  try {
    // As on a primary demoted under its open sessions: this session refuses every write.
    const client = await pool.connect();
    await client.query('SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY');
    await expect(client.query('CREATE TEMP TABLE failover_probe (x int)')).rejects.toMatchObject({
      code: '25006',
    });
    client.release();
    // The next checkout is a new session, which writes.
    const next = await pool.query<{ ro: string }>(
      "SELECT current_setting('transaction_read_only') AS ro",
    );
    expect(next.rows[0]!.ro).toBe('off');
    // withTransaction likewise: the session it used is not the one the pool hands out next.
    let pid = 0;
    await expect(
      withTransaction(pool, async (c) => {
        pid = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
        await c.query('SET TRANSACTION READ ONLY');
        await c.query('CREATE TEMP TABLE failover_probe (x int)');
      }),
    ).rejects.toMatchObject({ code: '25006' });
    const after = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    expect(after.rows[0]!.pid).not.toBe(pid);
  } finally {
    await pool.end();
  }
});

test("every session has server-side keepalives, so a vanished client's session (and its locks) ends within ~25 s", async () => {
  const pool = createPool({ connectionString: url, max: 1 });
  try {
    const r = await pool.query<{ idle: string; interval: string; count: string }>(
      "SELECT current_setting('tcp_keepalives_idle') AS idle, current_setting('tcp_keepalives_interval') AS interval, current_setting('tcp_keepalives_count') AS count",
    );
    expect(r.rows[0]).toEqual({ idle: '10', interval: '5', count: '3' });
  } finally {
    await pool.end();
  }
});
