import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import type { PgBoss } from 'pg-boss';
import { createPool, ROLES } from '@mtg/db';
import { createLogger } from '@mtg/log';
import {
  announceWorker,
  CHANNELS,
  createBoss,
  createTaskEvents,
  installQueue,
  SUPERVISE_SECONDS,
  type TaskEvents,
  wakeChannelOf,
} from '@mtg/tasks';
import {
  createMaintenance,
  createWorkerLoop,
  createWorkerPeers,
  type RunDeps,
} from '../src/index.ts';
import { pollUntil } from '../../../test/support/poll.ts';
import { bossWith } from './boss-with.ts';
import { testClock } from '../../../test/support/test-clock.ts';
import { createTestDatabase, type TestDatabase } from '../../../test/support/database.ts';

// What an idle worker costs the database: one created task wakes one worker (not every
// worker of the pool), a full worker passes the notification on, one worker leads
// maintenance, and work nobody fetched is announced again without any worker polling.
const QUEUE = 'tool.wakeup.000000000000';
const silent = createLogger('test', { silent: true });
let db: TestDatabase;
let pool: Pool;
let notifier: Pool;
const cleanups: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  db = await createTestDatabase();
  await installQueue(db.url, [ROLES.gateway, ROLES.worker], [QUEUE]);
  pool = createPool({ connectionString: db.logins.worker, role: ROLES.worker });
  notifier = createPool({ connectionString: db.url });
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
  await notifier.query('DELETE FROM app.workers');
});
afterAll(async () => {
  await pool?.end();
  await notifier?.end();
  await db?.drop();
});

/** The real pg-boss, with the fetches of each worker counted (and how many jobs each asked). */
async function countingBoss(
  fetched: string[],
  who: string,
  asked: number[] = [],
  paths: string[] = [],
): Promise<PgBoss> {
  const boss = createBoss(pool, { supervise: false });
  boss.on('error', () => {});
  await boss.start();
  cleanups.push(() => boss.stop({ graceful: false, close: false }));
  return new Proxy(boss, {
    get(target, prop, receiver) {
      if (prop === 'fetch') {
        return (name: string, options: { batchSize: number; db?: unknown }) => {
          // With `db`, pg-boss only builds its fetch for the worker's own (jobFetch).
          if (!options.db) {
            fetched.push(who);
            asked.push(options.batchSize);
            paths.push('pg-boss');
          }
          return target.fetch(name, options as never);
        };
      }
      const value = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/**
 * The worker's pool: its fetches of one job with their claim (claimNextJob) counted like
 * pg-boss's, and run on the real pool; any other statement (a run's) runs there too, or,
 * with `stuck`, never answers.
 */
function countingPool(
  fetched: string[],
  who: string,
  asked: number[],
  paths: string[],
  stuck = false,
  /** How long each fetch with its claim takes at least (announcements pile up meanwhile). */
  slowMs = 0,
): Pool {
  const never = () => new Promise(() => {});
  return new Proxy(pool, {
    get(target, prop, receiver) {
      if (prop === 'connect' && stuck) return never;
      if (prop === 'query') {
        return (q: { text?: string }, ...rest: unknown[]) => {
          const fetching = typeof q === 'object' && q.text?.includes('fetched AS (');
          if (fetching) {
            fetched.push(who);
            asked.push(1);
            paths.push('with its claim');
          }
          if (stuck && !fetching) return never();
          if (fetching && slowMs > 0) {
            return new Promise((r) => setTimeout(r, slowMs)).then(() =>
              target.query(q as never, ...(rest as [])),
            );
          }
          return target.query(q as never, ...(rest as []));
        };
      }
      const value = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

async function startWorker(
  id: string,
  fetched: string[],
  o: {
    concurrency?: number;
    stuck?: boolean;
    slowMs?: number;
    asked?: number[];
    /** How each fetch went: 'pg-boss' (a fetch alone) or 'with its claim' (claimNextJob). */
    paths?: string[];
    /** Wraps the worker's pg-boss (after counting). */
    boss?: (boss: PgBoss) => PgBoss;
    /** Every created notification the worker's process hears, on either channel. */
    heard?: string[];
  } = {},
) {
  const asked = o.asked ?? [];
  const paths = o.paths ?? [];
  const counted = await countingBoss(fetched, id, asked, paths);
  const wakeChannel = wakeChannelOf(id);
  await announceWorker(pool, { id, queues: [QUEUE], registryFingerprint: 'f', wakeChannel });
  const events: TaskEvents = await createTaskEvents(db.logins.worker, [
    CHANNELS.created,
    wakeChannel,
  ]);
  cleanups.push(() => events.close());
  for (const channel of [CHANNELS.created, wakeChannel])
    events.on(channel, (payload) => o.heard?.push(`${id} ${String(payload.taskId)}`));
  const peers = createWorkerPeers({ self: id, pool });
  const loop = createWorkerLoop({
    boss: o.boss ? o.boss(counted) : counted,
    events,
    queues: [QUEUE],
    concurrency: o.concurrency ?? 4,
    pollMs: 3_600_000, // no safety poll during the test
    logger: silent,
    peers,
    workerId: id,
    wakeChannel,
    forward: async (payload) => {
      await pool.query('SELECT pg_notify($1, $2)', [CHANNELS.created, JSON.stringify(payload)]);
    },
    run: {
      pool: countingPool(fetched, id, asked, paths, o.stuck, o.slowMs),
      tools: new Map(),
      workerId: id,
      leaseMs: 60_000,
    } as unknown as RunDeps,
  });
  await loop.start();
  return { loop, peers };
}

const notify = (payload: Record<string, unknown>) =>
  notifier.query('SELECT pg_notify($1, $2)', [CHANNELS.created, JSON.stringify(payload)]);

test('each created task wakes exactly one of the idle workers, the one they all agree on', async () => {
  const fetched: string[] = [];
  const ids = ['worker-a', 'worker-b', 'worker-c'];
  const workers: Array<Awaited<ReturnType<typeof startWorker>>> = [];
  for (const id of ids) workers.push(await startWorker(id, fetched));
  for (const w of workers) await w.peers.refresh();
  cleanups.push(async () => {
    for (const w of workers) await w.loop.stop(0);
  });
  fetched.length = 0; // the start-up fetches
  // The agreement spreads tasks over the workers; these six all go to worker-b.
  const ids40 = Array.from({ length: 40 }, (_, i) => `task-${i}`);
  expect(new Set(ids40.map((t) => workers[0]!.peers.preferred(QUEUE, t))).size).toBe(3);
  const tasks = ids40.filter((t) => workers[2]!.peers.preferred(QUEUE, t) === 'worker-b');
  tasks.splice(6);
  const expected = tasks.map((t) => workers[0]!.peers.preferred(QUEUE, t));
  expect(new Set(expected)).toEqual(new Set(['worker-b']));
  for (const taskId of tasks) await notify({ taskId, queue: QUEUE });
  await pollUntil(
    async () => new Set(fetched).size,
    (n) => n >= new Set(expected).size,
    10_000,
    10,
    'a fetch by each chosen worker',
  );
  // Give a herd time to show itself: every further fetch would be a wasted one.
  await new Promise((r) => setTimeout(r, 300));
  // Only the chosen workers fetched, at most once per notification (announcements that
  // arrive during a fetch are taken together, in one batch).
  expect([...new Set(fetched)].sort()).toEqual([...new Set(expected)].sort());
  expect(fetched.length).toBeLessThanOrEqual(tasks.length);
});

test("a task aimed at a worker's own channel wakes that worker's process alone, whichever the others would agree on", async () => {
  const fetched: string[] = [];
  const heard: string[] = [];
  const ids = ['worker-a', 'worker-b', 'worker-c'];
  const workers: Array<Awaited<ReturnType<typeof startWorker>>> = [];
  for (const id of ids) workers.push(await startWorker(id, fetched, { heard }));
  for (const w of workers) await w.peers.refresh();
  cleanups.push(async () => {
    for (const w of workers) await w.loop.stop(0);
  });
  fetched.length = 0; // the start-up fetches
  // Tasks the agreement gives to worker-a, aimed (as a gateway with an older view of the
  // workers might aim them) at worker-c: the gateway's choice stands.
  const tasks = Array.from({ length: 40 }, (_, i) => `aimed-${i}`)
    .filter((t) => workers[0]!.peers.preferred(QUEUE, t) === 'worker-a')
    .slice(0, 3);
  expect(tasks.length).toBe(3);
  for (const taskId of tasks) {
    await notifier.query('SELECT pg_notify($1, $2)', [
      wakeChannelOf('worker-c'),
      JSON.stringify({ taskId, queue: QUEUE }),
    ]);
  }
  await pollUntil(
    async () => fetched.length,
    (n) => n >= 1,
    10_000,
    10,
    'a fetch by the aimed worker',
  );
  await new Promise((r) => setTimeout(r, 300));
  expect(new Set(fetched)).toEqual(new Set(['worker-c']));
  // No other worker's process heard of the tasks at all.
  expect(heard.sort()).toEqual(tasks.map((t) => `worker-c ${t}`).sort());
});

test('a full worker passes the notification on, once, to the next worker', async () => {
  const fetched: string[] = [];
  await notifier.query(`SELECT 1`);
  const boss = createBoss(pool, { supervise: false });
  boss.on('error', () => {});
  await boss.start();
  cleanups.push(() => boss.stop({ graceful: false, close: false }));
  await boss.send(QUEUE, { taskId: 'occupies-the-full-worker' });
  // A run that never returns (its database never answers once the job is fetched): the
  // worker stays full.
  const full = await startWorker('worker-full', fetched, { concurrency: 1, stuck: true });
  await pollUntil(
    async () => full.loop.running(),
    (n) => n === 1,
    10_000,
    10,
    'the full worker running its job',
  );
  const asked: number[] = [];
  const idle = await startWorker('worker-idle', fetched, { asked });
  cleanups.push(() => idle.loop.stop(0));
  await full.peers.refresh();
  await idle.peers.refresh();
  fetched.length = 0;
  asked.length = 0;
  // Task ids the agreement gives to the full worker.
  const forFull = Array.from({ length: 40 }, (_, i) => `t-${i}`)
    .filter((t) => idle.peers.preferred(QUEUE, t) === 'worker-full')
    .slice(0, 3);
  expect(forFull.length).toBe(3);
  for (const taskId of forFull) await notify({ taskId, queue: QUEUE });
  // Announcements that arrive during a fetch are fetched together: count the jobs asked for.
  const total = () => asked.reduce((a, b) => a + b, 0);
  await pollUntil(
    async () => total(),
    (n) => n >= forFull.length,
    10_000,
    10,
    'the idle worker fetching what was passed on',
  );
  await new Promise((r) => setTimeout(r, 300));
  expect(new Set(fetched)).toEqual(new Set(['worker-idle']));
  expect(total()).toBe(forFull.length);
});

test('a woken worker fetches with its claim; with a pg-boss whose fetch it cannot embed, with pg-boss alone for good; a passing error changes nothing', async () => {
  // The fetch pg-boss builds for the worker to embed (called with `db`), made to fail.
  const building =
    (fail: () => Error | string | undefined) =>
    (boss: PgBoss): PgBoss =>
      bossWith(boss, 'fetch', (async (
        name: string,
        options: { db?: { executeSql: (t: string) => Promise<unknown> } },
      ) => {
        const failure = options.db ? fail() : undefined;
        if (failure instanceof Error) throw failure;
        if (failure) {
          await options.db!.executeSql(failure);
          return [];
        }
        return boss.fetch(name, options as never);
      }) as never);
  const wake = async (who: { peers: { refresh(): Promise<void> } }, paths: string[], n: number) => {
    await who.peers.refresh();
    await notify({ taskId: `t-${randomUUID()}`, queue: QUEUE });
    await pollUntil(
      async () => paths.length,
      (l) => l >= n,
      10_000,
      10,
      'the fetch',
    );
  };

  const passing: string[] = [];
  let down = true;
  const a = await startWorker('worker-passing', [], {
    paths: passing,
    slowMs: 200,
    boss: building(() => (down ? new Error('connection refused') : undefined)),
  });
  cleanups.push(() => a.loop.stop(0));
  // Its first look, with no count of jobs announced: one pg-boss fetch of a batch.
  expect(passing).toEqual(['pg-boss']);
  passing.length = 0;
  await notify({ taskId: 'while-down', queue: QUEUE });
  await new Promise((r) => setTimeout(r, 300));
  expect(passing).toEqual([]); // the fetch failed with the database; nothing was fetched
  down = false;
  await wake(a, passing, 1);
  expect(passing).toEqual(['with its claim']);
  // Announcements that pile up during a fetch (each takes 200 ms here): each job is still
  // fetched with its claim, not in a batch.
  for (let i = 0; i < 3; i++) await notify({ taskId: `t-${randomUUID()}`, queue: QUEUE });
  await pollUntil(
    async () => passing.length,
    (l) => l >= 4,
    10_000,
    10,
    'three more fetches',
  );
  await new Promise((r) => setTimeout(r, 300));
  expect(passing).toEqual(Array(4).fill('with its claim'));
  await a.loop.stop(0);
  await notifier.query('DELETE FROM app.workers'); // gone: the next notification is b's alone

  const other: string[] = [];
  const b = await startWorker('worker-other-shape', [], {
    paths: other,
    boss: building(() => 'SELECT id FROM pgboss.job'),
  });
  cleanups.push(() => b.loop.stop(0));
  other.length = 0;
  await wake(b, other, 1);
  await wake(b, other, 2);
  expect(other).toEqual(['pg-boss', 'pg-boss']);
});

test('one worker leads maintenance; when it stops, another takes over at its next tick', async () => {
  const boss = createBoss(pool, { supervise: false });
  boss.on('error', () => {});
  await boss.start();
  cleanups.push(() => boss.stop({ graceful: false, close: false }));
  const make = () =>
    createMaintenance({ pool, boss, logger: silent, tickMs: 3_600_000, purgeEveryMs: 60_000 });
  const first = make();
  const second = make();
  cleanups.push(async () => {
    first.stop();
    second.stop();
  });
  await first.tick();
  await second.tick();
  expect([first.leading(), second.leading()]).toEqual([true, false]);
  first.stop();
  await pollUntil(
    async () => {
      await second.tick();
      return second.leading();
    },
    (leading) => leading,
    10_000,
    50,
    'the second instance leading',
  );
  await first.tick();
  expect(first.leading()).toBe(false);
});

test('started followers wait for the lock in PostgreSQL: one leads as soon as the leader stops, with no tick', async () => {
  const boss = createBoss(pool, { supervise: false });
  boss.on('error', () => {});
  await boss.start();
  cleanups.push(() => boss.stop({ graceful: false, close: false }));
  const follower = createPool({
    connectionString: db.logins.worker,
    role: ROLES.worker,
    applicationName: 'follower',
  });
  cleanups.push(() => follower.end());
  // No timer tick within the test: whatever happens after the first tick is the wait's doing.
  const options = { boss, logger: silent, tickMs: 3_600_000, purgeEveryMs: 60_000 };
  const first = createMaintenance({ pool, ...options });
  const second = createMaintenance({ pool: follower, ...options, leaderWaitMs: 300 });
  cleanups.push(async () => {
    first.stop();
    second.stop();
  });
  first.start();
  await first.tick();
  await pollUntil(async () => first.leading(), Boolean, 10_000, 20, 'the first leading');
  second.start();
  await second.tick();
  // The follower's one statement waits in PostgreSQL, and is asked again at its bound.
  const waiting = () =>
    notifier.query<{ started: string; xmin: string | null }>(
      `SELECT query_start::text AS started, backend_xmin::text AS xmin FROM pg_stat_activity
        WHERE datname = current_database() AND application_name = 'follower'
          AND wait_event_type = 'Lock'
          AND query LIKE '%LOCK TABLE app.maintenance_leader%'`,
    );
  const before = await pollUntil(
    async () => (await waiting()).rows,
    (rows) => rows.length === 1,
    10_000,
    20,
    "the follower's wait",
  );
  await pollUntil(
    async () => (await waiting()).rows,
    (rows) => rows.length === 1 && rows[0]!.started !== before[0]!.started,
    10_000,
    20,
    'the wait asked again after its bound',
  );
  // Neither the waiting follower nor the leader (idle in the transaction that holds the lock)
  // holds PostgreSQL's cleanup horizon back: no snapshot, no xid.
  expect((await waiting()).rows.map((r) => r.xmin)).toEqual([null]);
  const leaderSession = await notifier.query<{ xmin: string | null; xid: string | null }>(
    `SELECT backend_xmin::text AS xmin, backend_xid::text AS xid FROM pg_stat_activity
      WHERE datname = current_database() AND state = 'idle in transaction'
        AND query LIKE '%LOCK TABLE app.maintenance_leader%'`,
  );
  expect(leaderSession.rows).toEqual([{ xmin: null, xid: null }]);
  expect(second.leading()).toBe(false);
  first.stop();
  await pollUntil(async () => second.leading(), Boolean, 5_000, 20, 'the follower leading');
});

test('a started follower stopped while it waits holds no connection', async () => {
  const own = createPool({
    connectionString: db.logins.worker,
    role: ROLES.worker,
    applicationName: 'stopped-follower',
  });
  const boss = createBoss(pool, { supervise: false });
  boss.on('error', () => {});
  await boss.start();
  cleanups.push(() => boss.stop({ graceful: false, close: false }));
  const options = { boss, logger: silent, tickMs: 3_600_000, purgeEveryMs: 60_000 };
  const leader = createMaintenance({ pool, ...options });
  cleanups.push(async () => leader.stop());
  await leader.tick();
  expect(leader.leading()).toBe(true);
  const m = createMaintenance({ pool: own, ...options });
  m.start();
  await m.tick();
  await pollUntil(
    async () =>
      (
        await notifier.query(
          `SELECT 1 FROM pg_stat_activity WHERE application_name = 'stopped-follower'
              AND wait_event_type = 'Lock' AND query LIKE '%LOCK TABLE app.maintenance_leader%'`,
        )
      ).rowCount,
    (n) => n === 1,
    10_000,
    20,
    "the follower's wait",
  );
  expect(own.totalCount - own.idleCount).toBe(1);
  m.stop();
  expect(m.leading()).toBe(false);
  // Nothing checked out: the pool's end() (the worker's last step) returns, the wait's
  // default bound (10 s) notwithstanding.
  expect(own.totalCount - own.idleCount).toBe(0);
  await own.end();
});

test('work nobody fetched is announced again by the leader: picked up with no poll', async () => {
  const fetched: string[] = [];
  const w = await startWorker('worker-only', fetched);
  cleanups.push(() => w.loop.stop(0));
  const boss = createBoss(pool, { supervise: false });
  boss.on('error', () => {});
  await boss.start();
  cleanups.push(() => boss.stop({ graceful: false, close: false }));
  fetched.length = 0;
  // Enqueued without a notification (a missed one, or a retry coming due).
  const jobId = await boss.send(QUEUE, { taskId: 'nobody-announced-me' });
  const leader = createMaintenance({
    pool,
    boss,
    logger: silent,
    tickMs: 3_600_000,
    purgeEveryMs: 60_000,
  });
  cleanups.push(async () => leader.stop());
  await new Promise((r) => setTimeout(r, 1200)); // ready for over a second
  expect(fetched).toEqual([]);
  await leader.tick();
  await pollUntil(
    async () => (await boss.getJobById(QUEUE, jobId!))?.state,
    (state) => state !== 'created',
    10_000,
    20,
    'the job fetched after the re-announcement',
  );
  expect(fetched).toEqual(['worker-only']);
});

test('stopped while its tick asks for the leader lock, it does not lead, and holds no connection', async () => {
  const own = createPool({ connectionString: db.logins.worker, role: ROLES.worker });
  cleanups.push(() => own.end());
  const boss = createBoss(pool, { supervise: false });
  boss.on('error', () => {});
  await boss.start();
  cleanups.push(() => boss.stop({ graceful: false, close: false }));
  const m = createMaintenance({
    pool: own,
    boss,
    logger: silent,
    tickMs: 3_600_000,
    purgeEveryMs: 60_000,
  });
  // A worker stopping during a tick: the lock is asked for, then stop(), then the answer.
  const ticking = m.tick();
  m.stop();
  await ticking;
  expect(m.leading()).toBe(false);
  // Nothing checked out: the pool's end() (the worker's last step) cannot wait for ever.
  expect(own.totalCount - own.idleCount).toBe(0);
  // And the lock is free for the next worker.
  const next = createMaintenance({
    pool,
    boss,
    logger: silent,
    tickMs: 3_600_000,
    purgeEveryMs: 60_000,
  });
  cleanups.push(async () => next.stop());
  await next.tick();
  expect(next.leading()).toBe(true);
});

test('an announcement answers the live workers in the same statement: itself, the others seen lately, none aged out', async () => {
  const queues = ['tool.peers.000000000000'];
  await announceWorker(pool, { id: 'peer-live', queues, registryFingerprint: 'f' });
  await announceWorker(pool, { id: 'peer-gone', queues, registryFingerprint: 'f' });
  const owner = createPool({ connectionString: db.url });
  cleanups.push(() => owner.end());
  await owner.query(
    `UPDATE app.workers SET seen_at = now() - interval '1 hour' WHERE id = 'peer-gone'`,
  );
  const first = await announceWorker(pool, { id: 'peer-new', queues, registryFingerprint: 'f' });
  const ids = (rows: Array<{ id: string }>) =>
    rows.map((r) => r.id).filter((id) => /^peer-/.test(id));
  // Its own row the first time too (from RETURNING: the read sees the table as before).
  expect(ids(first).sort()).toEqual(['peer-live', 'peer-new']);
  expect(first.find((r) => r.id === 'peer-new')?.queues).toEqual(queues);
  // And a worker that knows them prefers among them alone.
  const peers = createWorkerPeers({ self: 'peer-new' });
  peers.know(first);
  const chosen = new Set(
    Array.from({ length: 40 }, (_, i) => peers.preferred(queues[0]!, `task-${i}`)),
  );
  expect([...chosen].sort()).toEqual(['peer-live', 'peer-new']);
});

test("the leader runs pg-boss's supervision once per SUPERVISE_SECONDS, however often it ticks", async () => {
  const boss = createBoss(pool, { supervise: false });
  boss.on('error', () => {});
  await boss.start();
  cleanups.push(() => boss.stop({ graceful: false, close: false }));
  let passes = 0;
  const counting = bossWith(boss, 'supervise', async () => void passes++);
  const clock = testClock();
  const leader = createMaintenance({
    pool,
    boss: counting,
    logger: silent,
    tickMs: 3_600_000,
    purgeEveryMs: 3_600_000,
    clock,
  });
  cleanups.push(async () => leader.stop());
  // A tick each second for three passes' worth of time.
  for (let second = 0; second < 3 * SUPERVISE_SECONDS; second++) {
    await leader.tick();
    clock.advance(1000);
  }
  expect(leader.leading()).toBe(true);
  expect(passes).toBe(3);
});
