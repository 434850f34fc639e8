import { createHash } from 'node:crypto';
import type { Pool } from 'pg';
import { liveWorkers } from '@mtg/tasks';

/**
 * Which worker a created task's notification is for. Every worker LISTENs, so every worker
 * hears every notification; if each fetched, one task would cost the database one fetch per
 * idle worker, N-1 of them empty. Instead the workers agree, without talking, on one of them
 * per notification: rendezvous hashing of the task id over the live workers that serve its
 * queue (app.workers, read every few seconds). The others stay asleep.
 */
export interface WorkerPeers {
  /** The worker that should fetch for `key` on `queue`, skipping `skip`; this one if alone. */
  preferred(queue: string, key: string, skip?: string): string;
  /** Re-reads the live workers. */
  refresh(): Promise<void>;
  /** Takes the live workers as read elsewhere (each announcement answers them: announceWorker). */
  know(workers: ReadonlyArray<{ id: string; queues: readonly string[] }>): void;
}

export function createWorkerPeers(o: {
  self: string;
  /** Without a pool the worker knows no peers: it is preferred for everything it serves. */
  pool?: Pool;
}): WorkerPeers {
  let byQueue = new Map<string, string[]>();
  const know: WorkerPeers['know'] = (workers) => {
    const next = new Map<string, string[]>();
    for (const row of workers) {
      for (const q of row.queues) next.set(q, [...(next.get(q) ?? []), row.id]);
    }
    byQueue = next;
  };
  return {
    preferred(queue, key, skip) {
      const ids = new Set(byQueue.get(queue) ?? []);
      ids.add(o.self);
      if (skip && ids.size > 1) ids.delete(skip);
      let best = o.self;
      let bestScore = '';
      for (const id of ids) {
        const score = createHash('sha256').update(`${key}\n${id}`).digest('hex');
        if (score > bestScore) {
          best = id;
          bestScore = score;
        }
      }
      return best;
    },
    async refresh() {
      if (!o.pool) return;
      know(await liveWorkers(o.pool));
    },
    know,
  };
}
