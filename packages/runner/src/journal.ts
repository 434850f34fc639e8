import type { Queryable } from '@mtg/db';
import type { Lease } from './lease.ts';

/** Outputs of the steps this task already completed, by step name. */
export async function loadJournal(db: Queryable, taskId: string): Promise<Map<string, unknown>> {
  const r = await db.query<{ step: string; output: { value: unknown } }>(
    'SELECT step, output FROM app.task_steps WHERE task_id = $1',
    [taskId],
  );
  return new Map(r.rows.map((row) => [row.step, row.output.value]));
}

/**
 * Records a completed step, fenced by the lease: returns false (and records nothing) when
 * the lease is no longer this worker's. A step already journaled is never overwritten.
 */
export async function journalStep(
  db: Queryable,
  taskId: string,
  lease: Lease,
  step: { name: string; seq: number; output: unknown; startedAt: Date },
): Promise<boolean> {
  const r = await db.query(
    `INSERT INTO app.task_steps (task_id, step, seq, output, lease_epoch, worker, started_at)
     SELECT id, $4, $5, $6, lease_epoch, lease_owner, $7 FROM app.tasks
      WHERE id = $1 AND lease_owner = $2 AND lease_epoch = $3
        AND status IN ('working', 'input_required')
     ON CONFLICT (task_id, step) DO NOTHING`,
    [
      taskId,
      lease.owner,
      lease.epoch,
      step.name,
      step.seq,
      JSON.stringify({ value: step.output }),
      step.startedAt,
    ],
  );
  return r.rowCount === 1;
}

/** Progress and status message, fenced like every other write. */
export async function recordProgress(
  db: Queryable,
  taskId: string,
  lease: Lease,
  progress: { current: number; total: number },
  message: string | undefined,
): Promise<void> {
  await db.query(
    `UPDATE app.tasks SET progress = $4, status_message = COALESCE($5, status_message), updated_at = now()
      WHERE id = $1 AND lease_owner = $2 AND lease_epoch = $3 AND status IN ('working', 'input_required')`,
    [taskId, lease.owner, lease.epoch, JSON.stringify(progress), message ?? null],
  );
}
