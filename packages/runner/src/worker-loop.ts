import { randomUUID } from 'node:crypto';
import type { Job, PgBoss } from 'pg-boss';
import type { Logger } from '@mtg/log';
import {
  CHANNELS,
  claimNextJob,
  HEARTBEAT_SECONDS,
  jobCompletion,
  jobFetch,
  type JobFetch,
  type TaskEvents,
  UnbuiltStatement,
} from '@mtg/tasks';
import { servedFingerprints } from './check-servable.ts';
import { runTask, type JobEnd, type PreClaim, type RunDeps, type RunResult } from './run-task.ts';
import { receiveJobs, runInJobTrace } from '@mtg/telemetry';
import { createJobCompletions } from './job-completions.ts';
import { StopRun } from './stop.ts';
import { createWorkerPeers, type WorkerPeers } from './worker-peers.ts';

export interface WorkerLoopOptions {
  boss: PgBoss;
  events: TaskEvents;
  run: RunDeps;
  /** The queues this worker serves (one per tool it runs): it fetches from no other. */
  queues: readonly string[];
  /** Tasks this process runs at once. */
  concurrency: number;
  /**
   * Safety poll of every served queue, every pollMs on average (each wait drawn from 0.75–1.25
   * of it). Pickup does not depend on it: notifications wake the chosen worker, and the
   * maintenance leader re-announces work nobody picked up.
   */
  pollMs: number;
  logger: Logger;
  /** Who else serves which queue, to agree on one worker per notification (default: alone). */
  peers?: WorkerPeers;
  /** This worker's id (as in app.workers), for `peers`. */
  workerId?: string;
  /**
   * This worker's own wake-up channel (wakeChannelOf, announced in app.workers; `events` must
   * LISTEN on it): a gateway notifies it of the tasks chosen for this worker.
   */
  wakeChannel?: string;
  /** Re-sends a created notification (when the chosen worker is full, once, to the next). */
  forward?: (payload: Record<string, unknown>) => Promise<void>;
  /** Metrics hook: called after every run with how it ended. */
  onRunEnded?: (taskId: string, result: RunResult) => void;
}

/** What the gateway puts on a task's job (it may be missing on a job someone else sent). */
type TaskJobData = { taskId?: unknown };

/**
 * Pulls task jobs and runs them. Pickup is pushed, not polled: the gateway NOTIFYs in the
 * transaction that creates the task, and the notification (delivered at commit) wakes one
 * worker — the one the serving workers agree on for that task (worker-peers.ts), on its own
 * channel (worker-directory.ts) — which fetches one job at once. A worker of another pool is
 * not woken, and neither are the other workers of this one: an idle worker's process does no
 * work per task (its listening session still reads and drops each notification before
 * PostgreSQL 19, which wakes every listener of a database). A full worker remembers the queue
 * and fetches from it when a run ends; if it was the chosen one it passes the notification
 * on, once. Cancel/deadline/revocation notifications reach the running task's abort signal
 * directly.
 */
export function createWorkerLoop(o: WorkerLoopOptions) {
  const running = new Map<
    string,
    { stop: AbortController; drain: AbortController; done: Promise<void> }
  >();
  const served = new Set(o.queues);
  const self = o.workerId ?? 'self';
  const peers = o.peers ?? createWorkerPeers({ self });
  let fetching = false;
  let again = false;
  /** Queues to fetch from, with at most how many jobs (a notification announces one). */
  const pending = new Map<string, number>();
  /** Queues announced while this worker was full: it looks there when a run ends. */
  const missed = new Set<string>();
  let stopped = false;
  let poller: NodeJS.Timeout | undefined;
  const offs: Array<() => void> = [];
  const free = () => o.concurrency - running.size;
  const completeJob = createJobCompletions(o.boss);

  const kick = async (queues: Iterable<string>, limit = Infinity): Promise<void> => {
    if (stopped) return;
    // Announcements add up: three notifications during a fetch are three jobs to fetch.
    for (const q of queues) pending.set(q, (pending.get(q) ?? 0) + limit);
    if (fetching) {
      again = true;
      return;
    }
    fetching = true;
    try {
      do {
        again = false;
        for (const [queue, wanted] of [...pending]) {
          if (free() <= 0) break;
          pending.delete(queue);
          missed.delete(queue);
          const batchSize = Math.min(free(), wanted);
          const claims = new Map<string, PreClaim>();
          // A span only for a fetch that brought jobs (receive-jobs.ts), not for every empty look.
          const jobs = await receiveJobs(queue, async () => {
            // Announced jobs: each fetched and its task claimed in one statement, when this
            // pg-boss allows (at once, on as many sessions). So is any look with room for one
            // job (a full worker's when a run ends): one statement, found or not. A look with no
            // count and more room (the safety poll, the leader's re-announcement) is one fetch
            // of a batch, however much room there is: most find nothing.
            const fetch =
              Number.isFinite(wanted) || batchSize === 1 ? await fetchOf(queue) : undefined;
            if (!fetch) return o.boss.fetch<TaskJobData>(queue, { batchSize });
            const served = servedFingerprints(o.run.tools);
            const claimOne = async () => {
              const sentAt = performance.now();
              const got = await claimNextJob<TaskJobData>(o.run.pool, {
                queue,
                fetch,
                workerId: o.run.workerId,
                leaseMs: o.run.leaseMs,
                served,
              });
              if (got?.claim) claims.set(got.job.id, { claim: got.claim, sentAt });
              return got?.job as Job<TaskJobData> | undefined;
            };
            const settled = await Promise.allSettled(Array.from({ length: batchSize }, claimOne));
            // What one statement took is run even when another failed (it holds a lease now).
            const failed = settled.find((r) => r.status === 'rejected');
            if (failed) {
              o.logger.warn('job fetch failed', {
                error:
                  failed.reason instanceof Error ? failed.reason.message : String(failed.reason),
              });
            }
            return settled.flatMap((r) => (r.status === 'fulfilled' && r.value ? [r.value] : []));
          });
          for (const job of jobs) start(job, claims.get(job.id));
          // A full batch of what was free may have left more behind: look again.
          if (jobs.length === batchSize && batchSize < wanted) {
            pending.set(queue, (pending.get(queue) ?? 0) + wanted - batchSize);
            again = true;
          }
        }
      } while (again && !stopped && free() > 0);
      if (free() <= 0) {
        // Full: what is left is looked at when a run ends (and by the safety poll).
        for (const queue of pending.keys()) missed.add(queue);
        pending.clear();
      }
    } catch (error) {
      o.logger.warn('job fetch failed', {
        error: error instanceof Error ? error.message : String(error),
      });
    } finally {
      fetching = false;
    }
  };

  /** `aimed`: on this worker's own channel, where a gateway chose it already. */
  const onCreated = (payload: Record<string, unknown>, aimed = false) => {
    const queue = payload.queue;
    if (typeof queue !== 'string') return void kick(served);
    // Another pool's work: stay asleep (no fetch, no database work).
    if (!served.has(queue)) return;
    // Announced again by the maintenance leader: whoever has room looks.
    if (payload.again === true) return void kick([queue]);
    const key = typeof payload.taskId === 'string' ? payload.taskId : randomUUID();
    const skip = typeof payload.skip === 'string' ? payload.skip : undefined;
    const chosen = aimed || peers.preferred(queue, key, skip) === self;
    if (free() > 0) {
      if (chosen) void kick([queue], 1);
      return;
    }
    missed.add(queue);
    if (chosen && !skip && o.forward) {
      o.forward({ ...payload, skip: self }).catch((error: Error) =>
        o.logger.warn('notification forward failed', { error: error.message }),
      );
    }
  };

  // pg-boss's fetch of one job of a queue, to claim the job's task in the same statement.
  // Should this pg-boss not build one, the loop fetches with pg-boss and claims after: said
  // once, not per fetch.
  let fetchBuilds = true;
  const fetches = new Map<string, JobFetch>();
  const fetchOf = async (queue: string): Promise<JobFetch | undefined> => {
    if (!fetchBuilds) return undefined;
    let fetch = fetches.get(queue);
    if (fetch) return fetch;
    try {
      fetch = await jobFetch(o.boss, queue);
    } catch (error) {
      if (!(error instanceof UnbuiltStatement)) throw error;
      fetchBuilds = false;
      o.logger.warn('job fetch not built; jobs are fetched, then their tasks claimed', {
        error: error.message,
      });
      return undefined;
    }
    fetches.set(queue, fetch);
    return fetch;
  };

  // pg-boss's completion of a job, to ride on a completion's statement. Should this pg-boss
  // not build one, the loop completes every job after its ending: said once, not per task.
  // Another error while it builds (pg-boss reads its queue from the database) costs only
  // this job's ride: the loop completes it after.
  let completionBuilds = true;
  const completionOf = async (job: Job<TaskJobData>) => {
    if (!completionBuilds) return undefined;
    try {
      return await jobCompletion(o.boss, job);
    } catch (error) {
      if (error instanceof UnbuiltStatement) {
        completionBuilds = false;
        o.logger.warn('job completion not built; jobs are completed after their ending', {
          error: error.message,
        });
      }
      return undefined;
    }
  };

  const start = (job: Job<TaskJobData>, claimed?: PreClaim) => {
    const taskId = job.data?.taskId;
    if (typeof taskId !== 'string') {
      void o.boss.fail(job.name, job, { error: 'job without taskId' });
      return;
    }
    const stop = new AbortController();
    const drain = new AbortController();
    const heartbeat = setInterval(
      () => {
        o.boss.touch(job.name, job).catch(() => {});
      },
      (HEARTBEAT_SECONDS * 1000) / 3,
    );
    heartbeat.unref();
    const jobEnd: JobEnd = { completion: () => completionOf(job), completed: false };
    const done = (async () => {
      try {
        const result = await runInJobTrace(
          job.data,
          'task.run',
          { 'mtg.task.id': taskId, 'messaging.destination.name': job.name },
          () =>
            runTask({ ...o.run, drain: drain.signal, job: jobEnd }, taskId, stop.signal, claimed),
        );
        o.logger.info('task run ended', { taskId, result });
        o.onRunEnded?.(taskId, result);
        if (
          result === 'settled' ||
          result === 'gone' ||
          result === 'lost' ||
          result === 'paused' ||
          result === 'unservable'
        ) {
          if (!jobEnd.completed) await completeJob(job);
        } else {
          // released (shutdown), held (another live worker), retry: pg-boss retries soon.
          await o.boss.fail(job.name, job, { reason: result });
        }
      } catch (error) {
        o.logger.error('task run crashed', {
          taskId,
          error: error instanceof Error ? error.message : String(error),
        });
        await o.boss.fail(job.name, job).catch(() => {});
      } finally {
        clearInterval(heartbeat);
        running.delete(taskId);
        void kick([...missed]);
      }
    })();
    running.set(taskId, { stop, drain, done });
  };

  // Each wait drawn anew: a fixed period started with the worker's 5 s announcement fired
  // with it every time, and two statements at once need a second pooled session (a backend
  // started and kept for it); workers started together would poll together too.
  const schedulePoll = () => {
    poller = setTimeout(
      () => {
        if (stopped) return;
        void kick(served);
        schedulePoll();
      },
      o.pollMs * (0.75 + Math.random() * 0.5),
    );
    poller.unref();
  };

  return {
    running: () => running.size,
    async start() {
      offs.push(o.events.on(CHANNELS.created, (payload) => onCreated(payload)));
      if (o.wakeChannel)
        offs.push(o.events.on(o.wakeChannel, (payload) => onCreated(payload, true)));
      offs.push(
        o.events.on(CHANNELS.control, (payload) => {
          const entry = running.get(String(payload.taskId));
          if (!entry) return;
          entry.stop.abort(new StopRun(stopReasonOf(payload)));
        }),
      );
      schedulePoll();
      await kick(served);
    },
    /**
     * Graceful stop: no new jobs; running tasks stop at their next step boundary (the step in
     * flight finishes and is journaled), give their lease back and let pg-boss hand the job
     * to another worker. After graceMs, in-flight steps are aborted too.
     */
    async stop(graceMs: number) {
      stopped = true;
      clearTimeout(poller);
      for (const off of offs) off();
      for (const r of running.values()) r.drain.abort();
      const all = Promise.allSettled([...running.values()].map((r) => r.done));
      const timer = setTimeout(() => {
        for (const r of running.values()) r.stop.abort(new StopRun('shutdown'));
      }, graceMs);
      await all;
      clearTimeout(timer);
    },
  };
}

/** What a control notification (`{ taskId, action }`) asks of the running task. */
export function stopReasonOf(payload: Record<string, unknown>): 'deadline' | 'revoked' | 'cancel' {
  if (payload.action === 'deadline') return 'deadline';
  if (payload.action === 'revoke') return 'revoked';
  return 'cancel';
}
