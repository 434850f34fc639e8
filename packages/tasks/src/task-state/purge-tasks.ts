import type { Pool } from 'pg';
import { appendAuditGrouped } from '@mtg/audit';
import type { Queryable } from '@mtg/db';
import { CHANNELS } from '../channels.ts';
import { ACTIVE, LIVE_LEASE } from './predicates.ts';

/** An active task past its deadline: whether a live worker holds it, and what it waited for. */
export interface LateTask {
  id: string;
  live: boolean;
  waiting: string | null;
}

/** Up to 100 active tasks past their deadline (the sweep stops or expires each; maintenanceSweep). */
export const LATE_TASKS = `SELECT id, ${LIVE_LEASE} AS live,
    CASE WHEN status_message LIKE 'waiting for a worker%' THEN status_message
         WHEN started_at IS NULL AND NOT EXISTS (
           SELECT 1 FROM app.workers w WHERE job_queue = ANY (w.queues)
              AND w.seen_at > now() - interval '15 seconds')
         THEN 'waiting for a worker that runs ' || tool END AS waiting
  FROM app.tasks
  WHERE ${ACTIVE} AND deadline <= now() LIMIT 100`;

/** Tells the worker running a late task to stop it (it settles the task itself). */
export async function signalDeadline(db: Queryable, taskId: string): Promise<void> {
  await db.query('SELECT pg_notify($1, $2)', [
    CHANNELS.control,
    JSON.stringify({ taskId, action: 'deadline' }),
  ]);
}

/**
 * Retention: ended tasks past their ttl (their steps and credentials go with them) and
 * expired results are deleted; one `task.purged` event says how many and which.
 */
export async function purgeExpired(pool: Pool): Promise<void> {
  const results = await pool.query('DELETE FROM app.task_results WHERE expires_at <= now()');
  const tasks = await pool.query<{ id: string }>(
    // purge_at = ended_at + ttl (migration 190): indexed, so a sweep reads only what it removes.
    `DELETE FROM app.tasks WHERE purge_at <= now() RETURNING id`,
  );
  if ((results.rowCount ?? 0) + (tasks.rowCount ?? 0) > 0) {
    await appendAuditGrouped(pool, {
      type: 'task.purged',
      actor: { subject: 'retention', kind: 'system' },
      data: {
        tasks: tasks.rowCount,
        results: results.rowCount,
        taskIds: tasks.rows.slice(0, 100).map((t) => t.id),
      },
    });
  }
}
