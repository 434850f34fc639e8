import { createHash } from 'node:crypto';
import type { Pool } from 'pg';
import { CHANNELS } from './channels.ts';
import { WORKER_SEEN_WITHIN_MS } from './live-workers.ts';

/**
 * Which worker a created task's notification is for, and on which channel it goes.
 *
 * The workers of a queue agree on one of them per task without talking: rendezvous hashing
 * of the task id over the live workers that serve the queue (app.workers). The creating
 * gateway makes the same choice over the same rows and notifies the chosen worker's own
 * channel, so the other workers' processes are not woken by a task they will not run. A
 * worker that announces no channel of its own (an earlier release) is notified on the shared
 * channel, where every worker hears it and the chosen one fetches, as before.
 */

/** The worker `key` (a task id) goes to among `ids`: the highest score wins. */
export function preferredWorker(ids: Iterable<string>, key: string): string | undefined {
  let best: string | undefined;
  let bestScore = '';
  for (const id of ids) {
    const score = createHash('sha256').update(`${key}\n${id}`).digest('hex');
    if (score > bestScore) {
      best = id;
      bestScore = score;
    }
  }
  return best;
}

/**
 * A worker's own wake-up channel: derived from its id (any text) as a short name PostgreSQL
 * takes as an identifier (63 bytes at most) and nobody has to quote.
 */
export function wakeChannelOf(workerId: string): string {
  return `${CHANNELS.created}_${createHash('sha256').update(workerId).digest('hex').slice(0, 24)}`;
}

export interface LiveWorker {
  id: string;
  queues: string[];
  /**
   * Its own wake-up channel; null for a worker of a release that LISTENs on the shared one
   * only, including one whose row a worker of this release announced a channel in before.
   */
  wake_channel: string | null;
}

export interface WorkerDirectory {
  /** Whether a live worker serves the queue. */
  serves(queue: string): Promise<boolean>;
  /** The channel a created task's notification goes to (the shared one when unsure). */
  wakeChannel(queue: string, taskId: string): Promise<string>;
}

/**
 * The live workers as a gateway knows them: app.workers read at most once per `cacheMs` for
 * every caller. A status read past that waits for a newer read. A start is answered from what
 * was last read while it is younger than `staleMs`, with a newer read behind the answer, so no
 * start under load waits for one; after a quiet spell the first start waits for a fresh read
 * (workers may have come and gone meanwhile). A read that fails leaves the shared channel as
 * the answer, never a failed start: every worker hears it.
 */
export function createWorkerDirectory(
  pool: Pool,
  options: { cacheMs?: number; staleMs?: number; seenWithinMs?: number } = {},
): WorkerDirectory {
  const cacheMs = options.cacheMs ?? 1000;
  const staleMs = Math.max(cacheMs, options.staleMs ?? 5 * cacheMs);
  const seenWithinMs = options.seenWithinMs ?? WORKER_SEEN_WITHIN_MS;
  let last: { byQueue: Map<string, LiveWorker[]>; at: number } | undefined;
  let reading: Promise<Map<string, LiveWorker[]>> | undefined;
  const read = async () => {
    const at = performance.now();
    const r = await pool.query<LiveWorker>(
      // A channel announced before the row's last announcement (an earlier release's, which
      // does not touch the column) may have nobody LISTENing on it: the shared one instead.
      `SELECT id, queues, CASE WHEN wake_seen_at = seen_at THEN wake_channel END AS wake_channel
         FROM app.workers WHERE seen_at > now() - $1 * interval '1 millisecond'`,
      [seenWithinMs],
    );
    const byQueue = new Map<string, LiveWorker[]>();
    for (const w of r.rows)
      for (const q of w.queues) byQueue.set(q, [...(byQueue.get(q) ?? []), w]);
    last = { byQueue, at };
    return byQueue;
  };
  /** What was last read, younger than `maxAgeMs`; past `cacheMs` a newer read starts. */
  const current = (maxAgeMs: number): Promise<Map<string, LiveWorker[]>> => {
    const age = last ? performance.now() - last.at : Infinity;
    if (age > cacheMs && !reading) {
      reading = read().finally(() => (reading = undefined));
      // Its failure reaches the callers that wait for it; the others were answered from `last`.
      reading.catch(() => {});
    }
    return last && age <= maxAgeMs ? Promise.resolve(last.byQueue) : reading!;
  };
  return {
    // A status read says what it waits for as of the last second: it waits for the read.
    async serves(queue) {
      return ((await current(cacheMs)).get(queue)?.length ?? 0) > 0;
    },
    async wakeChannel(queue, taskId) {
      const workers = await current(staleMs).catch(() => undefined);
      const serving = workers?.get(queue) ?? [];
      const chosen = preferredWorker(
        serving.map((w) => w.id),
        taskId,
      );
      return serving.find((w) => w.id === chosen)?.wake_channel ?? CHANNELS.created;
    },
  };
}
