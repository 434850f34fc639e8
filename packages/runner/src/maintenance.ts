import type { Pool } from 'pg';
import type { PgBoss } from 'pg-boss';
import type { Logger } from '@mtg/log';
import {
  expireTask,
  lateTasks,
  purgeExpired,
  reapExpiredLeases,
  signalDeadline,
  type OnTaskEnded,
} from '@mtg/tasks';

/**
 * Housekeeping every worker runs (it is idempotent, so several at once are harmless):
 * - lease reaper: a task whose lease expired (its worker died) has its job failed so pg-boss
 *   retries it at once elsewhere — failover in about leaseMs + the tick, not the 10 s+
 *   pg-boss heartbeat;
 * - deadline sweep: tasks past their deadline stop — the running worker is told, and a task
 *   nobody runs is settled as failed here;
 * - retention purge: ended tasks past their retention, and expired results, are deleted.
 */
export function createMaintenance(o: {
  pool: Pool;
  boss: PgBoss;
  logger: Logger;
  tickMs: number;
  purgeEveryMs: number;
  /** Told about each task the deadline sweep ends. */
  onTaskEnded?: OnTaskEnded;
  /**
   * Paces the purge (default: the system clock). Which rows are due is the database's
   * now(), as everywhere a row's time is compared (docs/architecture.md, "Time").
   */
  clock?: () => Date;
}) {
  const now = () => (o.clock ? o.clock().getTime() : Date.now());
  let timer: NodeJS.Timeout | undefined;
  let lastPurge = 0;
  let busy = false;

  const reapLeases = async () => {
    for (const t of await reapExpiredLeases(o.pool)) {
      if (t.job_id)
        await o.boss
          .fail(t.job_queue, t.job_id, { reason: 'lease expired' } as never)
          .catch(() => {});
      o.logger.info('reaped expired lease', { taskId: t.id });
    }
  };

  const sweepDeadlines = async () => {
    for (const t of await lateTasks(o.pool)) {
      if (t.live) {
        await signalDeadline(o.pool, t.id);
        continue;
      }
      await expireTask(
        { pool: o.pool, ...(o.onTaskEnded ? { onTaskEnded: o.onTaskEnded } : {}) },
        t.id,
        t.waiting
          ? `Deadline exceeded before the task could finish: it was ${t.waiting}, and none came`
          : 'Deadline exceeded before the task could finish; it was stopped',
      );
    }
  };

  const tick = async () => {
    if (busy) return;
    busy = true;
    try {
      await reapLeases();
      await sweepDeadlines();
      if (now() - lastPurge >= o.purgeEveryMs) {
        lastPurge = now();
        await purgeExpired(o.pool);
      }
    } catch (error) {
      o.logger.warn('maintenance tick failed', {
        error: error instanceof Error ? error.message : String(error),
      });
    } finally {
      busy = false;
    }
  };

  return {
    start() {
      timer = setInterval(() => void tick(), o.tickMs);
      timer.unref();
    },
    stop() {
      clearInterval(timer);
    },
    tick,
  };
}
