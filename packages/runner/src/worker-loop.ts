import type { PgBoss } from 'pg-boss';
import type { Logger } from '@mtg/log';
import { CHANNELS, HEARTBEAT_SECONDS, type TaskEvents } from '@mtg/tasks';
import { runTask, type RunDeps, type RunResult } from './run-task.ts';
import { runInJobTrace } from '@mtg/telemetry';
import { StopRun } from './stop.ts';

export interface WorkerLoopOptions {
  boss: PgBoss;
  events: TaskEvents;
  run: RunDeps;
  /** The queues this worker serves (one per tool it runs): it fetches from no other. */
  queues: readonly string[];
  /** Tasks this process runs at once. */
  concurrency: number;
  /** Fallback poll when no notification arrives (missed while reconnecting, etc.). */
  pollMs: number;
  logger: Logger;
  /** Metrics hook: called after every run with how it ended. */
  onRunEnded?: (taskId: string, result: RunResult) => void;
}

type Job = { id: string; name: string; data: { taskId: string } };

/**
 * Pulls task jobs and runs them. Pickup is pushed, not polled: the gateway NOTIFYs on our
 * own channel in the transaction that creates the task, and the notification (delivered at
 * commit) makes this loop fetch at once — from that task's queue, and only when this worker
 * serves it: a worker of another pool is not woken. Cancel/deadline/revocation notifications
 * reach the running task's abort signal directly.
 */
export function createWorkerLoop(o: WorkerLoopOptions) {
  const running = new Map<
    string,
    { stop: AbortController; drain: AbortController; done: Promise<void> }
  >();
  const served = new Set(o.queues);
  let fetching = false;
  let again = false;
  /** Queues with work announced since the last fetch; undefined entries: poll them all. */
  const pending = new Set<string>();
  let stopped = false;
  let poller: NodeJS.Timeout | undefined;
  const offs: Array<() => void> = [];

  const kick = async (queues: Iterable<string> = served): Promise<void> => {
    if (stopped) return;
    for (const q of queues) pending.add(q);
    if (fetching) {
      again = true;
      return;
    }
    fetching = true;
    try {
      do {
        again = false;
        for (const queue of [...pending]) {
          const free = o.concurrency - running.size;
          if (free <= 0) break;
          pending.delete(queue);
          const jobs = (await o.boss.fetch(queue, { batchSize: free })) as unknown as Job[];
          for (const job of jobs) start(job);
          // A full batch may have left more behind: look again.
          if (jobs.length === free) {
            pending.add(queue);
            again = true;
          }
        }
      } while (again && !stopped && o.concurrency - running.size > 0);
      if (o.concurrency - running.size <= 0) pending.clear(); // the poll and ends of runs look again
    } catch (error) {
      o.logger.warn('job fetch failed', {
        error: error instanceof Error ? error.message : String(error),
      });
    } finally {
      fetching = false;
    }
  };

  const start = (job: Job) => {
    const taskId = job.data?.taskId;
    if (typeof taskId !== 'string') {
      void o.boss.fail(job.name, job as never, { error: 'job without taskId' } as never);
      return;
    }
    const stop = new AbortController();
    const drain = new AbortController();
    const heartbeat = setInterval(
      () => {
        o.boss.touch(job.name, job as never).catch(() => {});
      },
      (HEARTBEAT_SECONDS * 1000) / 3,
    );
    heartbeat.unref();
    const done = (async () => {
      try {
        const result = await runInJobTrace(
          job.data,
          'task.run',
          { 'mtg.task.id': taskId, 'messaging.destination.name': job.name },
          () => runTask({ ...o.run, drain: drain.signal }, taskId, stop.signal),
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
          await o.boss.complete(job.name, job as never);
        } else {
          // released (shutdown), held (another live worker), retry: pg-boss retries soon.
          await o.boss.fail(job.name, job as never, { reason: result } as never);
        }
      } catch (error) {
        o.logger.error('task run crashed', {
          taskId,
          error: error instanceof Error ? error.message : String(error),
        });
        await o.boss.fail(job.name, job as never).catch(() => {});
      } finally {
        clearInterval(heartbeat);
        running.delete(taskId);
        void kick();
      }
    })();
    running.set(taskId, { stop, drain, done });
  };

  return {
    running: () => running.size,
    async start() {
      offs.push(
        o.events.on(CHANNELS.created, (payload) => {
          const queue = payload.queue;
          // Another pool's work: stay asleep (no fetch, no database work).
          if (typeof queue === 'string' && !served.has(queue)) return;
          void kick(typeof queue === 'string' ? [queue] : served);
        }),
      );
      offs.push(
        o.events.on(CHANNELS.control, (payload) => {
          const entry = running.get(String(payload.taskId));
          if (!entry) return;
          entry.stop.abort(new StopRun(stopReasonOf(payload)));
        }),
      );
      poller = setInterval(() => void kick(), o.pollMs);
      poller.unref();
      await kick();
    },
    /**
     * Graceful stop: no new jobs; running tasks stop at their next step boundary (the step in
     * flight finishes and is journaled), give their lease back and let pg-boss hand the job
     * to another worker. After graceMs, in-flight steps are aborted too.
     */
    async stop(graceMs: number) {
      stopped = true;
      clearInterval(poller);
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
