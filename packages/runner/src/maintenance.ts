import type { Pool } from 'pg';
import type { PgBoss } from 'pg-boss';
import { appendAudit } from '@mtg/audit';
import { withTransaction } from '@mtg/db';
import type { Logger } from '@mtg/log';
import { CHANNELS, settleTask, type OnTaskEnded } from '@mtg/tasks';

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
    const r = await o.pool.query<{ id: string; job_id: string | null; job_queue: string }>(
      `UPDATE app.tasks SET lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
        WHERE status IN ('working', 'input_required') AND lease_owner IS NOT NULL
          AND lease_expires_at < now() - interval '500 milliseconds'
        RETURNING id, job_id, job_queue`,
    );
    for (const t of r.rows) {
      if (t.job_id)
        await o.boss
          .fail(t.job_queue, t.job_id, { reason: 'lease expired' } as never)
          .catch(() => {});
      o.logger.info('reaped expired lease', { taskId: t.id });
    }
  };

  const sweepDeadlines = async () => {
    const r = await o.pool.query<{ id: string; live: boolean; waiting: string | null }>(
      `SELECT id, lease_owner IS NOT NULL AND lease_expires_at > now() AS live,
              CASE WHEN status_message LIKE 'waiting for a worker%' THEN status_message
                   WHEN started_at IS NULL AND NOT EXISTS (
                     SELECT 1 FROM app.workers w WHERE job_queue = ANY (w.queues)
                        AND w.seen_at > now() - interval '15 seconds')
                   THEN 'waiting for a worker that runs ' || tool END AS waiting
         FROM app.tasks
        WHERE status IN ('working', 'input_required') AND deadline <= now() LIMIT 100`,
    );
    for (const t of r.rows) {
      if (t.live) {
        await o.pool.query('SELECT pg_notify($1, $2)', [
          CHANNELS.control,
          JSON.stringify({ taskId: t.id, action: 'deadline' }),
        ]);
        continue;
      }
      const ended = await withTransaction(o.pool, async (c) => {
        const row = await settleTask(c, {
          taskId: t.id,
          status: 'failed',
          outcome: 'deadline',
          message: t.waiting
            ? `Deadline exceeded before the task could finish: it was ${t.waiting}, and none came`
            : 'Deadline exceeded before the task could finish; it was stopped',
          endedBy: { path: 'deadline' },
        });
        if (row) {
          await appendAudit(c, {
            type: 'task.failed',
            taskId: row.id,
            tenant: row.tenant,
            subject: row.subject,
            client: row.client,
            tool: row.tool,
            reason: 'deadline',
            correlationId: row.correlation_id,
            actor: { subject: 'deadline-sweeper', kind: 'system' },
            data: {
              durationMs: row.ended_at!.getTime() - row.created_at.getTime(),
              deadline: row.deadline.toISOString(),
            },
          });
        }
        return row;
      });
      if (ended) o.onTaskEnded?.(ended);
    }
  };

  const purge = async () => {
    const results = await o.pool.query('DELETE FROM app.task_results WHERE expires_at <= now()');
    const tasks = await o.pool.query<{ id: string }>(
      `DELETE FROM app.tasks WHERE ended_at IS NOT NULL AND ended_at + ttl_ms * interval '1 millisecond' <= now()
       RETURNING id`,
    );
    if ((results.rowCount ?? 0) + (tasks.rowCount ?? 0) > 0) {
      await appendAudit(o.pool, {
        type: 'task.purged',
        actor: { subject: 'retention', kind: 'system' },
        data: {
          tasks: tasks.rowCount,
          results: results.rowCount,
          taskIds: tasks.rows.slice(0, 100).map((t) => t.id),
        },
      });
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
        await purge();
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
