import type { Queryable } from '@mtg/db';
import { CHANNELS } from '../channels.ts';
import type { TaskRow, TaskStatus } from '../task-row.ts';
import { ACTIVE, fenced } from './predicates.ts';
import type { Lease } from './lease.ts';

export interface Settlement {
  taskId: string;
  status: Extract<TaskStatus, 'completed' | 'failed' | 'cancelled'>;
  outcome: string;
  message: string;
  endedBy: Record<string, unknown>;
  /**
   * The lease the writer holds: the update matches only while it is still current (a stale
   * worker's settlement matches nothing). Omit to settle from outside the lease (cancel
   * without a live worker, deadline sweep, revocation); that bumps the epoch, fencing off
   * any worker still running.
   */
  lease?: Lease;
}

/**
 * Told about a task that just ended, by the process that ended it, once the transaction that
 * settled it has committed (metrics: each task's duration is observed exactly once).
 */
export type OnTaskEnded = (task: TaskRow) => void;

/**
 * Moves an active task to a terminal state exactly once, inside the caller's transaction.
 * Returns the row, or undefined when the task was already terminal or the lease was lost.
 * Notifies waiters on commit. Only end-task.ts calls it: every ending also writes its audit
 * event and fires the hook.
 */
export async function settleTask(db: Queryable, s: Settlement): Promise<TaskRow | undefined> {
  const leased = s.lease !== undefined;
  const result = await db.query<TaskRow>(
    `UPDATE app.tasks SET
        status = $2, outcome = $3, status_message = $4, ended_by = $5,
        ended_at = now(), updated_at = now(),
        dedupe_until = CASE WHEN idempotency_kind = 'derived'
                            THEN now() + dedupe_window_ms * interval '1 millisecond' END,
        lease_owner = NULL, lease_expires_at = NULL,
        lease_epoch = CASE WHEN $6 THEN lease_epoch ELSE lease_epoch + 1 END
      WHERE id = $1 AND ${ACTIVE}
        AND (NOT $6 OR (${fenced('$7', '$8')}))
      RETURNING *`,
    [
      s.taskId,
      s.status,
      s.outcome,
      s.message,
      JSON.stringify(s.endedBy),
      leased,
      s.lease?.owner ?? null,
      s.lease?.epoch ?? null,
    ],
  );
  const row = result.rows[0];
  if (row) {
    // The task-bound delegation ends with the task.
    await db.query('DELETE FROM app.task_credentials WHERE task_id = $1', [s.taskId]);
    await db.query('SELECT pg_notify($1, $2)', [
      CHANNELS.settled,
      JSON.stringify({ taskId: s.taskId, status: s.status }),
    ]);
  }
  return row;
}
