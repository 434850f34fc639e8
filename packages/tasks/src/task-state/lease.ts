import { prepared, runPrepared, type Queryable } from '@mtg/db';
import { ACTIVE, fenced, NOT_ENDED } from './predicates.ts';

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

/** The `progress` column's value for a report (its message goes to `status_message`). */
export const progressJson = (p: PendingProgress | undefined): string | null =>
  p ? JSON.stringify({ current: p.current, total: p.total }) : null;

/**
 * What a boundary reads of app.tasks (as columns b_cancel, b_by, b_late, b_revoked): the
 * claim and the journal read it too, so the boundary right after them needs no statement.
 */
export const BOUNDARY_COLUMNS = `cancel_requested_at IS NOT NULL AS b_cancel,
  cancel_requested_by AS b_by, deadline <= now() AS b_late,
  (SELECT p.revoked FROM app.principals p
    WHERE p.tenant = app.tasks.tenant AND p.subject = app.tasks.subject) AS b_revoked`;

export interface BoundaryRow {
  b_cancel: boolean;
  b_by: Record<string, unknown> | null;
  b_late: boolean;
  b_revoked: boolean | null;
}

/** The boundary a row of BOUNDARY_COLUMNS says (undefined row: the task is not ours). */
export function boundaryOf(row: BoundaryRow | undefined): Boundary {
  if (!row) return NOT_MINE;
  return {
    mine: true,
    cancelRequested: row.b_cancel,
    cancelRequestedBy: row.b_by,
    pastDeadline: row.b_late,
    revoked: row.b_revoked === true,
  };
}

const RENEW = prepared(
  `UPDATE app.tasks SET lease_expires_at = now() + $4 * interval '1 millisecond',
          progress = COALESCE($5::jsonb, progress),
          status_message = COALESCE($6, status_message),
          updated_at = CASE WHEN $5::jsonb IS NULL THEN updated_at ELSE now() END
    WHERE id = $1 AND ${fenced('$2', '$3')} AND ${NOT_ENDED}
    RETURNING ${BOUNDARY_COLUMNS}`,
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
  const r = await runPrepared<BoundaryRow>(db, RENEW, [
    taskId,
    lease.owner,
    lease.epoch,
    leaseMs,
    progressJson(progress),
    progress?.message ?? null,
  ]);
  return boundaryOf(r.rows[0]);
}

const READ_BOUNDARY = prepared(
  `SELECT ${BOUNDARY_COLUMNS} FROM app.tasks
    WHERE id = $1 AND ${fenced('$2', '$3')} AND ${NOT_ENDED}`,
);

/**
 * Reads what a step boundary must know (is the lease still this worker's, cancel, deadline,
 * revocation) without renewing the lease: for a check made while the lease was renewed
 * recently enough, a read that writes nothing (no WAL, no commit to flush).
 */
export async function readBoundary(db: Queryable, taskId: string, lease: Lease): Promise<Boundary> {
  const r = await runPrepared<BoundaryRow>(db, READ_BOUNDARY, [taskId, lease.owner, lease.epoch]);
  return boundaryOf(r.rows[0]);
}

/** Gives the lease up without ending the task (graceful shutdown, retry later). */
export async function releaseLease(db: Queryable, taskId: string, lease: Lease): Promise<void> {
  await db.query(
    `UPDATE app.tasks SET lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
      WHERE id = $1 AND ${fenced('$2', '$3')}`,
    [taskId, lease.owner, lease.epoch],
  );
}

/**
 * The lease of a task whose worker died; the caller fails its job so pg-boss retries it. The
 * lapsed expiry stays: until the next claim it is what says the worker was lost
 * (WORKER_LOST), where a lease given back (releaseLease) or ended has none. Reads the leased
 * active tasks only (index tasks_leased, migration 210), however many wait. Run by
 * maintenanceSweep.
 */
export const REAP_EXPIRED_LEASES = `UPDATE app.tasks SET lease_owner = NULL, updated_at = now()
  WHERE ${ACTIVE} AND lease_owner IS NOT NULL
    AND lease_expires_at < now() - interval '500 milliseconds'
  RETURNING id, job_id, job_queue`;
