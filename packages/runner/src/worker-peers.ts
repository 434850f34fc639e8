import type { Pool } from 'pg';
import { liveWorkers, preferredWorker } from '@mtg/tasks';

/**
 * Which worker a notification on the shared channel is for. Every worker LISTENs there, so
 * every worker hears it; if each fetched, one task would cost the database one fetch per
 * idle worker, N-1 of them empty. Instead the workers agree, without talking, on one of them
 * per notification: rendezvous hashing of the task id over the live workers that serve its
 * queue (app.workers, read every few seconds). The others stay asleep. A gateway makes the
 * same choice and notifies the chosen worker's own channel (worker-directory.ts); the shared
 * channel carries what a gateway could not aim (the chosen worker has no channel of its own),
 * a full worker's pass-on, and the maintenance leader's re-announcements.
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
      return preferredWorker(ids, key) ?? o.self;
    },
    async refresh() {
      if (!o.pool) return;
      know(await liveWorkers(o.pool));
    },
    know,
  };
}
