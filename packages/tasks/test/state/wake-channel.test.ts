import type pg from 'pg';
import { pollUntil } from '../../../../test/support/poll.ts';
import { CHANNELS } from '../../src/channels.ts';
import { announceWorker } from '../../src/live-workers.ts';
import { createTask } from '../../src/task-state/index.ts';
import {
  createWorkerDirectory,
  preferredWorker,
  wakeChannelOf,
} from '../../src/worker-directory.ts';
import {
  openStateDatabase,
  QUEUE,
  startDeps,
  startInput,
  type StateDatabase,
} from './state-database.ts';

// worker-directory.ts: a start notifies the worker the workers' own agreement chooses, on
// that worker's channel, so no other worker's process is woken; a worker that announced no
// channel (an earlier release) is notified on the shared channel, as before.
let s: StateDatabase;
let listener: pg.PoolClient;
const heard: Array<{ channel: string; taskId: string; queue: string }> = [];
const AIMED = ['w-a', 'w-b']; // announce a channel of their own
const OLD = 'w-old'; // announces none
const OTHER = 'w-other'; // serves another queue only
beforeAll(async () => {
  s = await openStateDatabase();
  await s.admin.query(
    `INSERT INTO app.workers (id, queues, registry_fingerprint, wake_channel)
     VALUES ($1, $4, 'r', $5), ($2, $4, 'r', $6), ($3, $4, 'r', NULL), ($7, '{other}', 'r', $8)`,
    [...AIMED, OLD, [QUEUE], ...AIMED.map(wakeChannelOf), OTHER, wakeChannelOf(OTHER)],
  );
  listener = await s.admin.connect();
  listener.on('notification', (m) =>
    heard.push({ channel: m.channel, ...JSON.parse(m.payload ?? '{}') }),
  );
  for (const channel of [CHANNELS.created, ...[...AIMED, OTHER].map(wakeChannelOf)])
    await listener.query(`LISTEN ${channel}`);
});
afterAll(async () => {
  listener?.release();
  await s?.close();
});

test("each start's notification goes to the chosen worker's own channel, or the shared one for a worker without", async () => {
  const deps = { ...startDeps(s), workers: createWorkerDirectory(s.gateway) };
  const chosen = new Map<string, string>();
  // Until each of the three serving workers was chosen twice (the hash spreads them).
  for (let i = 0; i < 200; i++) {
    const counts = [...AIMED, OLD].map((w) => [...chosen.values()].filter((c) => c === w).length);
    if (Math.min(...counts) >= 2) break;
    const started = await createTask(deps, startInput('waker', `wake-${i}`));
    if (!started.ok) throw new Error(started.message);
    chosen.set(started.task.id, preferredWorker([...AIMED, OLD], started.task.id)!);
  }
  await pollUntil(
    async () => heard.length,
    (n) => n >= chosen.size,
    10_000,
    10,
    'a notification for every start',
  );
  await new Promise((r) => setTimeout(r, 100)); // any second notification would show by now
  expect(heard).toHaveLength(chosen.size);
  for (const h of heard) {
    const worker = chosen.get(h.taskId)!;
    expect({ ...h, worker }).toEqual({
      channel: worker === OLD ? CHANNELS.created : wakeChannelOf(worker),
      taskId: h.taskId,
      queue: QUEUE,
      worker,
    });
  }
});

test('a queue no live worker serves, or a directory that cannot read, leaves the shared channel', async () => {
  const directory = createWorkerDirectory(s.gateway, { cacheMs: 0 });
  expect(await directory.wakeChannel('nobody-serves-this', 't')).toBe(CHANNELS.created);
  expect(await directory.serves('nobody-serves-this')).toBe(false);
  expect(await directory.serves(QUEUE)).toBe(true);
  // A worker not seen for longer than the live window is not chosen.
  const gone = createWorkerDirectory(s.gateway, { cacheMs: 0, seenWithinMs: 0 });
  expect(await gone.wakeChannel(QUEUE, 't')).toBe(CHANNELS.created);
  expect(await gone.serves(QUEUE)).toBe(false);
  const failing = createWorkerDirectory({
    query: () => Promise.reject(new Error('connection refused')),
  } as unknown as pg.Pool);
  expect(await failing.wakeChannel(QUEUE, 't')).toBe(CHANNELS.created);
  await expect(failing.serves(QUEUE)).rejects.toThrow('connection refused');
});

test('a directory answers from what it read until that is older than its cache, then reads again', async () => {
  const directory = createWorkerDirectory(s.gateway, { cacheMs: 60_000 });
  expect(await directory.serves('late-queue')).toBe(false);
  await s.admin.query(
    `INSERT INTO app.workers (id, queues, registry_fingerprint, wake_channel)
     VALUES ('w-late', '{late-queue}', 'r', $1)`,
    [wakeChannelOf('w-late')],
  );
  expect(await directory.serves('late-queue')).toBe(false);
  const fresh = createWorkerDirectory(s.gateway, { cacheMs: 0 });
  expect(await fresh.wakeChannel('late-queue', 't')).toBe(wakeChannelOf('w-late'));
});

test('a start is answered from what was read while a newer read runs; a status read waits for the newer read', async () => {
  const directory = createWorkerDirectory(s.gateway, { cacheMs: 0, staleMs: 60_000 });
  expect(await directory.wakeChannel('behind-queue', 't')).toBe(CHANNELS.created);
  await s.admin.query(
    `INSERT INTO app.workers (id, queues, registry_fingerprint, wake_channel)
     VALUES ('w-behind', '{behind-queue}', 'r', $1)`,
    [wakeChannelOf('w-behind')],
  );
  // Answered from the first read, which did not see the worker; a newer read starts.
  expect(await directory.wakeChannel('behind-queue', 't')).toBe(CHANNELS.created);
  await pollUntil(
    () => directory.wakeChannel('behind-queue', 't'),
    (channel) => channel === wakeChannelOf('w-behind'),
    10_000,
    10,
    'the newer read answering',
  );
  // A status read of a queue nobody served a moment ago sees the worker that came since.
  const statuses = createWorkerDirectory(s.gateway, { cacheMs: 0, staleMs: 60_000 });
  expect(await statuses.serves('status-queue')).toBe(false);
  await s.admin.query(
    `INSERT INTO app.workers (id, queues, registry_fingerprint) VALUES ('w-status', '{status-queue}', 'r')`,
  );
  expect(await statuses.serves('status-queue')).toBe(true);
});

test("a worker id reused by an earlier release's worker loses the channel it no longer LISTENs on", async () => {
  // A worker of this release killed (its row stays), and within the live window a worker of
  // the previous release starting with the same WORKER_ID: it upserts with its own statement
  // (v0.1.0's, copied here as it ran), which leaves wake_channel as it was.
  const earlierReleaseAnnounce = `INSERT INTO app.workers (id, queues, registry_fingerprint)
     VALUES ($1, $2, $3)
     ON CONFLICT (id) DO UPDATE SET queues = $2, registry_fingerprint = $3, seen_at = now()`;
  const id = 'w-reused';
  const queue = 'reused-queue';
  const directory = createWorkerDirectory(s.gateway, { cacheMs: 0, staleMs: 0 });
  const announce = () =>
    announceWorker(s.worker, {
      id,
      queues: [queue],
      registryFingerprint: 'r',
      wakeChannel: wakeChannelOf(id),
    });
  await announce();
  expect(await directory.wakeChannel(queue, 't')).toBe(wakeChannelOf(id));
  await s.worker.query(earlierReleaseAnnounce, [id, [queue], 'r']);
  expect(await directory.wakeChannel(queue, 't')).toBe(CHANNELS.created);
  // A worker of this release taking the id back announces its channel again.
  await announce();
  expect(await directory.wakeChannel(queue, 't')).toBe(wakeChannelOf(id));
});

test("a worker's channel is a plain identifier of at most 63 bytes, whatever its id", () => {
  for (const id of ['w', 'worker-7f9c', 'host.example/with spaces "and quotes"', 'x'.repeat(500)]) {
    expect(wakeChannelOf(id)).toMatch(/^[a-z_][a-z0-9_]{0,62}$/);
  }
  expect(wakeChannelOf('a')).not.toBe(wakeChannelOf('b'));
});
