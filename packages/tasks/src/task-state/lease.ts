import { prepared, runPrepared, type Queryable } from '@mtg/db';
import type { TaskRow } from '../task-row.ts';
import { ACTIVE, fenced } from './predicates.ts';

/** A worker's claim on a task: the epoch fences off every earlier holder. */
export interface Lease {
  owner: string;
  epoch: number;
}

export interface Boundary {
  /** False when another worker took over or the task ended: stop without writing. */
  mine: boolean;
  cancelRequested: boolean;
  cancelRequestedBy: Record<string, unknown> | null;
  pastDeadline: boolean;
  /** The owner has been revoked (Shared Signals, admin): stop acting for them. */
  revoked: boolean;
}

const NOT_MINE: Boundary = {
  mine: false,
  cancelRequested: false,
  cancelRequestedBy: null,
  pastDeadline: false,
  revoked: false,
};

/** Progress a tool reported since the last boundary, written with the next renewal. */
export interface PendingProgress {
  current: number;
  total: number;
  message?: string | undefined;
}

const RENEW = prepared(
  `UPDATE app.tasks SET lease_expires_at = now() + $4 * interval '1 millisecond',
          progress = COALESCE($5::jsonb, progress),
          status_message = COALESCE($6, status_message),
          updated_at = CASE WHEN $5::jsonb IS NULL THEN updated_at ELSE now() END
    WHERE id = $1 AND ${fenced('$2', '$3')} AND ${ACTIVE}
    RETURNING cancel_requested_at IS NOT NULL AS cancel, cancel_requested_by AS by,
              deadline <= now() AS late,
              (SELECT p.revoked FROM app.principals p
                WHERE p.tenant = app.tasks.tenant AND p.subject = app.tasks.subject) AS revoked`,
);

/**
 * Renews the lease and reads what a step boundary must know, in one statement; `progress`
 * (the tool's latest report) rides along, so reporting progress costs no statement of its own.
 */
export async function renewLease(
  db: Queryable,
  taskId: string,
  lease: Lease,
  leaseMs: number,
  progress?: PendingProgress,
): Promise<Boundary> {
  const r = await runPrepared<{
    cancel: boolean;
    by: Record<string, unknown> | null;
    late: boolean;
    revoked: boolean | null;
  }>(db, RENEW, [
    taskId,
    lease.owner,
    lease.epoch,
    leaseMs,
    progress ? JSON.stringify({ current: progress.current, total: progress.total }) : null,
    progress?.message ?? null,
  ]);
  const row = r.rows[0];
  if (!row) return NOT_MINE;
  return {
    mine: true,
    cancelRequested: row.cancel,
    cancelRequestedBy: row.by,
    pastDeadline: row.late,
    revoked: row.revoked === true,
  };
}

/** Gives the lease up without ending the task (graceful shutdown, retry later). */
export async function releaseLease(db: Queryable, taskId: string, lease: Lease): Promise<void> {
  await db.query(
    `UPDATE app.tasks SET lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
      WHERE id = $1 AND ${fenced('$2', '$3')}`,
    [taskId, lease.owner, lease.epoch],
  );
}

/** The lease of a task whose worker died; the caller fails its job so pg-boss retries it. */
export async function reapExpiredLeases(
  db: Queryable,
): Promise<Array<Pick<TaskRow, 'id' | 'job_id' | 'job_queue'>>> {
  const r = await db.query<Pick<TaskRow, 'id' | 'job_id' | 'job_queue'>>(
    `UPDATE app.tasks SET lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
      WHERE ${ACTIVE} AND lease_owner IS NOT NULL
        AND lease_expires_at < now() - interval '500 milliseconds'
      RETURNING id, job_id, job_queue`,
  );
  return r.rows;
}
