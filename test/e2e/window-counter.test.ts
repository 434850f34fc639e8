// The fixed-window counters behind the rate limits (createWindowCounter, @mtg/db): counts are
// shared through app.rate_limits by every replica, a window lasts its duration on the clock
// it is given from the key's first count, and a moved clock rolls it over without waiting.
import {
  countInTurn,
  countInTurnWithin,
  createPool,
  createWindowCounter,
  prepared,
  type CountChain,
  type Pool,
} from '@mtg/db';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { submittedStatements } from '../support/submitted-statements.ts';
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

test('countInTurn counts each key only while the ones before it allowed it, in one statement', async () => {
  const clock = testClock();
  const make = (prefix: string, points: number) =>
    createWindowCounter({ pool, prefix, points, durationMs: 60_000, clock });
  const [subject, client, tenant] = [
    make('t_subject', 2),
    make('t_client', 3),
    make('t_tenant', 10),
  ];
  const chain = (s: string) => [
    { counter: subject, key: s },
    { counter: client, key: 'c' },
    { counter: tenant, key: 't' },
  ];
  const points = async (key: string) =>
    (await pool.query(`SELECT points FROM app.rate_limits WHERE key = $1`, [key])).rows[0]
      ?.points as number | undefined;
  // One statement for the three counts.
  let first: Awaited<ReturnType<typeof countInTurn>> | 'not run' = 'not run';
  const statements = await submittedStatements(async () => {
    first = await countInTurn(chain('alice'));
  });
  expect(first).toBeUndefined();
  expect(statements).toHaveLength(1);
  expect(await countInTurn(chain('alice'))).toBeUndefined();
  // alice's third start is refused by her own limit: the client and the tenant are not counted.
  expect(await countInTurn(chain('alice'))).toMatchObject({
    index: 0,
    count: { ok: false, consumed: 3 },
  });
  expect([
    await points('t_subject:alice'),
    await points('t_client:c'),
    await points('t_tenant:t'),
  ]).toEqual([3, 2, 2]);
  // bob's first start is refused by the client's limit (its fourth): the tenant is not counted.
  expect(await countInTurn(chain('bob'))).toBeUndefined();
  expect(await countInTurn(chain('bob'))).toMatchObject({
    index: 1,
    count: { ok: false, consumed: 4 },
  });
  expect([
    await points('t_subject:bob'),
    await points('t_client:c'),
    await points('t_tenant:t'),
  ]).toEqual([2, 4, 3]);
  // Refused from memory now, without a round trip: nothing is counted.
  expect(await countInTurn(chain('alice'))).toMatchObject({ index: 0, count: { consumed: 0 } });
  expect(await countInTurn(chain('carol'))).toMatchObject({ index: 1, count: { consumed: 0 } });
  expect([await points('t_subject:carol'), await points('t_client:c')]).toEqual([1, 4]);
});

test('countInTurn with PostgreSQL unreachable counts on its own, stopping at the first refusal', async () => {
  const clock = testClock();
  const down = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/none' });
  try {
    const make = (prefix: string, points: number) =>
      createWindowCounter({ pool: down, prefix, points, durationMs: 60_000, clock });
    const [subject, tenant] = [make('s', 1), make('t', 5)];
    const chain = [
      { counter: subject, key: 'k' },
      { counter: tenant, key: 'k' },
    ];
    expect(await countInTurn(chain)).toBeUndefined();
    expect(await countInTurn(chain)).toMatchObject({ index: 0, count: { ok: false, consumed: 2 } });
  } finally {
    await down.end();
  }
});

test('countInTurnWithin counts the chain beside a lookup of its own in one statement, and throws when it fails', async () => {
  const clock = testClock();
  const make = (prefix: string, points: number) =>
    createWindowCounter({ pool, prefix, points, durationMs: 60_000, clock });
  const [subject, tenant] = [make('w_subject', 1), make('w_tenant', 2)];
  const chain = (s: string) => [
    { counter: subject, key: s },
    { counter: tenant, key: 't' },
  ];
  // The lookup beside the counts: a parameter of its own, numbered after the chain's.
  const lengths: number[] = [];
  const beside = (c: CountChain) => {
    lengths.push(c.columns.length / 2);
    return prepared(
      `WITH ${c.sql} SELECT ${c.columns.join(', ')}, $${c.firstParameter}::text AS echoed FROM ${c.name}`,
    );
  };
  let first: Awaited<ReturnType<typeof countInTurnWithin>> | undefined;
  const statements = await submittedStatements(async () => {
    first = await countInTurnWithin(chain('ann'), beside, ['hello']);
  });
  expect(statements).toHaveLength(1);
  expect(first).toEqual({
    row: { p0: 1, e0: expect.anything(), p1: 1, e1: expect.anything(), echoed: 'hello' },
  });
  // ann's second start is refused by her own limit: the tenant is not counted.
  expect(await countInTurnWithin(chain('ann'), beside, ['x'])).toMatchObject({
    refusal: { index: 0, count: { consumed: 2 } },
    row: { p0: 2, p1: null, echoed: 'x' },
  });
  // Refused from memory at the first key: nothing runs, no row (the caller looks up alone).
  expect(await countInTurnWithin(chain('ann'), beside, ['y'])).toEqual({
    refusal: { index: 0, count: { ok: false, consumed: 0, msBeforeNext: expect.any(Number) } },
  });
  // The tenant's third count refuses (bob is its second), then from memory at the second key:
  // the first key alone is counted, still beside the lookup.
  await countInTurnWithin(chain('bob'), beside, ['z']);
  expect(await countInTurnWithin(chain('cat'), beside, ['z'])).toMatchObject({
    refusal: { index: 1, count: { consumed: 3 } },
  });
  expect(await countInTurnWithin(chain('dan'), beside, ['z'])).toMatchObject({
    refusal: { index: 1, count: { consumed: 0 } },
    row: { p0: 1, echoed: 'z' },
  });
  // Built once per chain length.
  expect(lengths).toEqual([2, 1]);
  // A failed statement is thrown, not counted locally.
  const down = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:1/none' });
  try {
    const lone = createWindowCounter({
      pool: down,
      prefix: 'd',
      points: 5,
      durationMs: 1000,
      clock,
    });
    await expect(countInTurnWithin([{ counter: lone, key: 'k' }], beside, ['q'])).rejects.toThrow();
  } finally {
    await down.end();
  }
});
