// The fixed-window counters behind the rate limits (createWindowCounter, @mtg/db): counts are
// shared through app.rate_limits by every replica, a window lasts its duration on the clock
// it is given from the key's first count, and a moved clock rolls it over without waiting.
import { createPool, createWindowCounter, type Pool } from '@mtg/db';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { testClock } from '../support/test-clock.ts';

let db: TestDatabase;
let pool: Pool;
beforeAll(async () => {
  db = await createTestDatabase();
  pool = createPool({ connectionString: db.url, applicationName: 'window-counter-test' });
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

test('two replicas share one window; exactly one count sees points + 1; the window ends on the clock', async () => {
  const clock = testClock();
  const options = { pool, prefix: 'polls', points: 3, durationMs: 1000, clock };
  const [a, b] = [createWindowCounter(options), createWindowCounter(options)];
  const counts = [await a('k'), await b('k'), await a('k')];
  expect(counts).toEqual([{ ok: true }, { ok: true }, { ok: true }]);
  // The fourth, on the other replica, reaches the table and is the first over the limit.
  const over = await b('k');
  expect(over).toMatchObject({ ok: false, consumed: 4 });
  expect(over.ok === false && over.msBeforeNext).toBeGreaterThan(0);
  expect(over.ok === false && over.msBeforeNext).toBeLessThanOrEqual(1000);
  // Replica a has not refused anyone yet: its first refusal also comes from the table.
  expect(await a('k')).toMatchObject({ ok: false, consumed: 5 });
  // From here on b refuses from memory, without a round trip (consumed 0).
  expect(await b('k')).toMatchObject({ ok: false, consumed: 0 });
  const rows = await pool.query(`SELECT points FROM app.rate_limits WHERE key = 'polls:k'`);
  expect(rows.rows).toEqual([{ points: 5 }]);
  // Another key has a window of its own.
  expect(await a('other')).toEqual({ ok: true });

  clock.advance(1000);
  expect(await a('k')).toEqual({ ok: true });
  expect(await b('k')).toEqual({ ok: true });
  const next = await pool.query(`SELECT points FROM app.rate_limits WHERE key = 'polls:k'`);
  expect(next.rows).toEqual([{ points: 2 }]);
});

test('with PostgreSQL unreachable each replica counts on its own, with the same numbers', async () => {
  const clock = testClock();
  // Nothing listens on port 1: every query fails at once.
  const down = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/none' });
  try {
    const count = createWindowCounter({
      pool: down,
      prefix: 'starts',
      points: 2,
      durationMs: 60_000,
      clock,
    });
    expect(await count('k')).toEqual({ ok: true });
    expect(await count('k')).toEqual({ ok: true });
    expect(await count('k')).toMatchObject({ ok: false, consumed: 3 });
    clock.advance(60_000);
    expect(await count('k')).toEqual({ ok: true });
  } finally {
    await down.end();
  }
});
