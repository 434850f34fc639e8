import { appendEventSql, auditAppendArgs, type AuditEvent } from '@mtg/audit';
import { prepared, runPrepared, type Queryable } from '@mtg/db';
import { fenced, NOT_ENDED } from './predicates.ts';
import {
  BOUNDARY_COLUMNS,
  boundaryOf,
  type Boundary,
  type BoundaryRow,
  type Lease,
  progressJson,
  type PendingProgress,
} from './lease.ts';

// One statement, its own transaction: the step, the boundary as it stands (cancel, deadline,
// the owner's revocation; the next step's boundary, which usually follows at once, reuses it),
// the tool's progress report still waiting to be written if there is one, and the step's
// audit event, appended last (the chain lock is held from there to the statement's commit).
// Nothing is appended or written when the step was not journaled. The append reads the
// progress write's count, so that write (and the task row's lock it takes) comes first: a
// data-modifying CTE no one reads runs after the rest, which would take the row after the
// chain, the reverse of a cancel request's order, and deadlock with it.
const JOURNAL = prepared(
  `WITH held AS (
     SELECT id, lease_epoch, lease_owner, ${BOUNDARY_COLUMNS} FROM app.tasks
      WHERE id = $1 AND ${fenced('$2', '$3')} AND ${NOT_ENDED}),
   journaled AS (
     INSERT INTO app.task_steps (task_id, step, seq, output, lease_epoch, worker, started_at)
     SELECT id, $4, $5, $6, lease_epoch, lease_owner, $7 FROM held
     ON CONFLICT (task_id, step) DO NOTHING RETURNING task_id),
   progressed AS (
     UPDATE app.tasks SET progress = $10::jsonb, status_message = COALESCE($11, status_message),
            updated_at = now()
      WHERE id = $1 AND $10::jsonb IS NOT NULL AND EXISTS (SELECT 1 FROM journaled)
      RETURNING id)
   SELECT b_cancel, b_by, b_late, b_revoked, ${appendEventSql('$8', '$9')} AS seq
     FROM held CROSS JOIN (SELECT count(*) FROM progressed) p
    WHERE EXISTS (SELECT 1 FROM journaled)`,
);

/**
 * Records a completed step, the progress report carried with it (if any) and its
 * `task.step_completed` event in one statement, fenced by
 * the lease, and returns the boundary read with it; `mine: false` (and nothing recorded) when
 * the lease is no longer the writer's. A step already journaled is never overwritten.
 */
export async function journalStep(
  db: Queryable,
  taskId: string,
  lease: Lease,
  step: { name: string; seq: number; output: unknown; startedAt: Date },
  event: () => AuditEvent,
  /** The tool's progress report not yet written: written with the step. */
  progress?: PendingProgress,
): Promise<Boundary> {
  const r = await runPrepared<BoundaryRow>(db, JOURNAL, [
    taskId,
    lease.owner,
    lease.epoch,
    step.name,
    step.seq,
    JSON.stringify({ value: step.output }),
    step.startedAt,
    ...auditAppendArgs(event()),
    progressJson(progress),
    progress?.message ?? null,
  ]);
  return boundaryOf(r.rows[0]);
}

/** The status message alone (a downstream outage the task waits out), fenced. */
export async function recordStatusMessage(
  db: Queryable,
  taskId: string,
  lease: Lease,
  message: string,
): Promise<void> {
  await db.query(
    `UPDATE app.tasks SET status_message = $4, updated_at = now()
      WHERE id = $1 AND ${fenced('$2', '$3')} AND status = 'working'`,
    [taskId, lease.owner, lease.epoch, message],
  );
}

/** Checkpoint mode: one stage per grant; a stage without one waits for a live user. */
export async function takeStageGrant(
  db: Queryable,
  taskId: string,
  lease: Lease,
): Promise<boolean> {
  const r = await db.query(
    `UPDATE app.tasks SET stage_grants = stage_grants - 1
      WHERE id = $1 AND ${fenced('$2', '$3')} AND stage_grants > 0`,
    [taskId, lease.owner, lease.epoch],
  );
  return r.rowCount === 1;
}
