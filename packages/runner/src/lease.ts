import type { Queryable } from '@mtg/db';
import type { TaskRow } from '@mtg/tasks';

export interface Lease {
  owner: string;
  epoch: number;
}

export type ClaimOutcome =
  | { kind: 'claimed'; lease: Lease; task: TaskRow; firstStart: boolean }
  | { kind: 'held' } // a live worker holds it (duplicate delivery)
  | { kind: 'gone' }; // terminal, purged or unknown: nothing to run

/**
 * Takes the task's lease: only when nobody holds a live one. Bumping the epoch fences off
 * the previous holder, whose later journal, result and status writes then match nothing.
 */
export async function claimLease(
  db: Queryable,
  taskId: string,
  owner: string,
  leaseMs: number,
): Promise<ClaimOutcome> {
  const r = await db.query<TaskRow & { first_start: boolean }>(
    `UPDATE app.tasks SET lease_owner = $2, lease_epoch = lease_epoch + 1,
            lease_expires_at = now() + $3 * interval '1 millisecond',
            attempts = attempts + 1, started_at = COALESCE(started_at, now()),
            status_message = CASE WHEN status_message = 'queued' THEN 'started' ELSE status_message END,
            updated_at = now()
      WHERE id = $1 AND status IN ('working', 'input_required')
        AND (lease_owner IS NULL OR lease_expires_at < now())
      RETURNING *, attempts = 1 AS first_start`,
    [taskId, owner, leaseMs],
  );
  const row = r.rows[0];
  if (row) {
    return {
      kind: 'claimed',
      lease: { owner, epoch: row.lease_epoch },
      task: row,
      firstStart: row.first_start,
    };
  }
  const s = await db.query<{ active: boolean }>(
    `SELECT status IN ('working', 'input_required') AS active FROM app.tasks WHERE id = $1`,
    [taskId],
  );
  return s.rows[0]?.active ? { kind: 'held' } : { kind: 'gone' };
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

/** Renews the lease and reads what a step boundary must know, in one statement. */
export async function renewAndCheck(
  db: Queryable,
  taskId: string,
  lease: Lease,
  leaseMs: number,
): Promise<Boundary> {
  const r = await db.query<{
    cancel: boolean;
    by: Record<string, unknown> | null;
    late: boolean;
    revoked: boolean | null;
  }>(
    `UPDATE app.tasks SET lease_expires_at = now() + $4 * interval '1 millisecond'
      WHERE id = $1 AND lease_owner = $2 AND lease_epoch = $3
        AND status IN ('working', 'input_required')
      RETURNING cancel_requested_at IS NOT NULL AS cancel, cancel_requested_by AS by,
                deadline <= now() AS late,
                (SELECT p.revoked FROM app.principals p
                  WHERE p.tenant = app.tasks.tenant AND p.subject = app.tasks.subject) AS revoked`,
    [taskId, lease.owner, lease.epoch, leaseMs],
  );
  const row = r.rows[0];
  if (!row)
    return {
      mine: false,
      cancelRequested: false,
      cancelRequestedBy: null,
      pastDeadline: false,
      revoked: false,
    };
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
      WHERE id = $1 AND lease_owner = $2 AND lease_epoch = $3`,
    [taskId, lease.owner, lease.epoch],
  );
}
