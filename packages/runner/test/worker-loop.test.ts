import { createPool, ROLES } from '@mtg/db';
import { createLogger } from '@mtg/log';
import { CHANNELS, createBoss, createTaskEvents, installQueue } from '@mtg/tasks';
import { createWorkerLoop, type RunDeps } from '../src/index.ts';
import { bossWith } from './boss-with.ts';
import { pollUntil } from '../../../test/support/poll.ts';
import { createTestDatabase, type TestDatabase } from '../../../test/support/database.ts';

// A worker of one pool must not be woken by another pool's work: a notification for a queue
// it does not serve costs it (and the database) nothing.
const MINE = 'tool.mine.000000000000';
const THEIRS = 'tool.theirs.000000000000';
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
  await installQueue(db.url, [ROLES.gateway, ROLES.worker], [MINE, THEIRS]);
});
afterAll(async () => {
  await db?.drop();
});

test("a notification for another pool's queue fetches nothing; one for its own queue fetches from that queue only", async () => {
  const pool = createPool({ connectionString: db.logins.worker, role: ROLES.worker });
  const boss = createBoss(pool, { supervise: false });
  boss.on('error', () => {});
  await boss.start();
  const fetched: string[] = [];
  // The real pg-boss, with its fetches counted.
  const counting = bossWith(boss, 'fetch', (name: string, options: unknown) => {
    fetched.push(name);
    return boss.fetch(name, options as never);
  });
  const events = await createTaskEvents(db.logins.worker, [CHANNELS.created, CHANNELS.control]);
  const loop = createWorkerLoop({
    boss: counting,
    events,
    queues: [MINE],
    concurrency: 4,
    pollMs: 3_600_000, // no fallback poll during the test
    logger: createLogger('test', { silent: true }),
    run: {} as RunDeps, // no job is ever fetched: nothing runs
  });
  const notifier = createPool({ connectionString: db.url });
  try {
    await loop.start();
    expect(fetched).toEqual([MINE]); // the start-up fetch of its own queues
    fetched.length = 0;
    for (let i = 0; i < 5; i++) {
      await notifier.query('SELECT pg_notify($1, $2)', [
        CHANNELS.created,
        JSON.stringify({ taskId: `t${i}`, queue: THEIRS }),
      ]);
    }
    // Notifications arrive in order on one connection: once this one is seen, so were those.
    await notifier.query('SELECT pg_notify($1, $2)', [
      CHANNELS.created,
      JSON.stringify({ taskId: 'mine', queue: MINE }),
    ]);
    await pollUntil(
      async () => fetched.length,
      (n) => n >= 1,
      10_000,
      10,
      'the fetch for its own queue',
    );
    expect(fetched).toEqual([MINE]);
  } finally {
    await loop.stop(0);
    await events.close();
    await boss.stop({ graceful: false, close: false });
    await pool.end();
    await notifier.end();
  }
});

test('the safety poll waits 0.75–1.25 of pollMs, drawn anew each time, not a fixed period', async () => {
  const pool = createPool({ connectionString: db.logins.worker, role: ROLES.worker });
  const boss = createBoss(pool, { supervise: false });
  boss.on('error', () => {});
  await boss.start();
  const polls: number[] = [];
  const timed = bossWith(boss, 'fetch', (name: string, options: unknown) => {
    polls.push(performance.now());
    return boss.fetch(name, options as never);
  });
  const events = await createTaskEvents(db.logins.worker, [CHANNELS.created, CHANNELS.control]);
  const POLL_MS = 100;
  const loop = createWorkerLoop({
    boss: timed,
    events,
    queues: [MINE],
    concurrency: 4,
    pollMs: POLL_MS,
    logger: createLogger('test', { silent: true }),
    run: {} as RunDeps, // the queue stays empty: nothing runs
  });
  try {
    await loop.start();
    await pollUntil(
      async () => polls.length,
      (n) => n >= 14,
      30_000,
      20,
      'fourteen fetches (the start-up one and thirteen polls)',
    );
  } finally {
    await loop.stop(0);
    await events.close();
    await boss.stop({ graceful: false, close: false });
    await pool.end();
  }
  const gaps = polls.slice(1, 14).map((t, i) => t - polls[i]!);
  // Never sooner than three quarters of the period (a late timer only makes a gap longer).
  for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(0.75 * POLL_MS - 2);
  // Twelve draws from 75–125 ms span tens of milliseconds; a fixed period spans its lateness.
  expect(Math.max(...gaps.slice(1)) - Math.min(...gaps.slice(1))).toBeGreaterThanOrEqual(15);
});
