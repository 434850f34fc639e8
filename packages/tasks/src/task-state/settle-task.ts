import { prepared, runPrepared, type Queryable } from '@mtg/db';
import { CHANNELS } from '../channels.ts';
import { TASK_SELECT, type TaskRow, type TaskStatus } from '../task-row.ts';
import { fenced, NOT_ENDED } from './predicates.ts';
import { progressJson, type Lease, type PendingProgress } from './lease.ts';

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
  /**
   * The tool's last progress report, not yet written (a completion carries it, so a report
   * right before the end costs no statement of its own); its message is not kept, since the
   * ending sets the status message.
   */
  progress?: PendingProgress;
}

/**
 * Told about a task that just ended, by the process that ended it, once the transaction that
 * settled it has committed (metrics: each task's duration is observed exactly once).
 */
export type OnTaskEnded = (task: TaskRow) => void;

/**
 * Moves an active task to a terminal state exactly once, inside the caller's transaction.
 * Returns the row, or undefined when the task was already terminal or the lease was lost.
 * Notifies waiters on commit, if any watch (watch-settle.ts). Only end-task.ts calls it: every
 * ending also writes its audit event and fires the hook.
 */
export async function settleTask(db: Queryable, s: Settlement): Promise<TaskRow | undefined> {
  const result = await runPrepared<TaskRow>(db, SETTLE, settleParams(s));
  return result.rows[0];
}

/** The parameters $1 … $11 of SETTLED. */
export function settleParams(s: Settlement): unknown[] {
  return [
    s.taskId,
    s.status,
    s.outcome,
    s.message,
    JSON.stringify(s.endedBy),
    s.lease !== undefined,
    s.lease?.owner ?? null,
    s.lease?.epoch ?? null,
    CHANNELS.settled,
    JSON.stringify({ taskId: s.taskId, status: s.status }),
    progressJson(s.progress),
  ];
}

/** No stop a boundary would see (BOUNDARY_COLUMNS all false), as a condition on app.tasks. */
const NO_STOP = `cancel_requested_at IS NULL AND deadline > now()
        AND NOT EXISTS (SELECT 1 FROM app.principals p
                         WHERE p.tenant = app.tasks.tenant AND p.subject = app.tasks.subject
                           AND p.revoked)`;

/**
 * The settlement as common table expressions, for a statement that does more with it (a
 * completion stores its result and appends its event in the same statement): `settled`, the
 * row as it ended; the end of the task-bound delegation (it ends with the task); and the
 * notification to waiters (sent on commit), each only when the task settled, the
 * notification only when someone watches for it (`settle_watched`, migration 260: every
 * NOTIFY wakes every listening session of the database, the workers' too). `notified` is one
 * row either way, so a statement joins it without losing the settled row. Parameters
 * $1 … $11 (`settleParams`). `atBoundary` (a completion at the run's end, in place of the
 * end's boundary read): it settles only if no stop stands either — no cancel requested, the
 * deadline not passed, the owner not revoked (what a boundary reads: lease.ts).
 */
export const settledCte = (atBoundary = false) => `settled AS (
     UPDATE app.tasks SET
        status = $2, outcome = $3, status_message = $4, ended_by = $5,
        ended_at = now(), updated_at = now(), progress = COALESCE($11::jsonb, progress),
        dedupe_until = CASE WHEN idempotency_kind = 'derived'
                            THEN now() + dedupe_window_ms * interval '1 millisecond' END,
        lease_owner = NULL, lease_expires_at = NULL,
        lease_epoch = CASE WHEN $6 THEN lease_epoch ELSE lease_epoch + 1 END
      WHERE id = $1 AND ${NOT_ENDED}
        AND (NOT $6 OR (${fenced('$7', '$8')}))${
          atBoundary
            ? `
        AND ${NO_STOP}`
            : ''
        }
      RETURNING ${TASK_SELECT}, settle_watched),
   ended_delegation AS (
     DELETE FROM app.task_credentials c USING settled WHERE c.task_id = settled.id
     RETURNING c.task_id),
   notified AS (SELECT count(pg_notify($9, $10)) AS n FROM settled WHERE settled.settle_watched)`;
const SETTLED = settledCte();
const SETTLE = prepared(`WITH ${SETTLED} SELECT settled.* FROM settled CROSS JOIN notified`);
