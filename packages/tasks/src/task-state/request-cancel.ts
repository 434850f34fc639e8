import type { Pool } from 'pg';
import { appendAuditInTransaction, type AuditEvent } from '@mtg/audit';
import { withTransaction, type Queryable } from '@mtg/db';
import { CHANNELS } from '../channels.ts';
import { ACTIVE, NOT_ENDED } from './predicates.ts';
import type { CancelledBy } from './end-task.ts';

/**
 * Flags an active task for cancellation (the first request's who and why stand), tells its
 * worker at once (`mtg_task_control`, delivered at commit) and writes `task.cancel_requested`,
 * in one transaction. The task ends when its worker (or the caller, cancelTaskNow) settles
 * it; the request waits for that ending, so it watches it (watch-settle.ts): it notifies.
 *
 * A request the row already records — same who, path and reason: the retry of a request
 * whose commit's outcome its sender did not learn — writes no second event (the worker is
 * told again: harmless). `same` decides that, on the row as it stood under its lock.
 */
export async function requestCancel(
  pool: Pool,
  taskId: string,
  by: CancelledBy & { reason: string },
  event: AuditEvent,
  same: (recorded: Record<string, unknown> | null) => boolean = () => false,
): Promise<void> {
  await withTransaction(pool, async (c) => {
    // The row's request before this one, read under the row lock the update takes: FOR NO
    // KEY UPDATE, the UPDATE's own lock. FOR UPDATE would also wait for the KEY SHARE lock a
    // worker's journal insert takes on the row (its foreign key, checked at the end of the
    // statement, after that statement took the chain lock), while this transaction goes on
    // to the chain lock: a deadlock between a cancel and a running step.
    const r = await c.query<{ before: Record<string, unknown> | null }>(
      `UPDATE app.tasks t SET cancel_requested_at = COALESCE(t.cancel_requested_at, now()),
              cancel_requested_by = COALESCE(t.cancel_requested_by, $2), updated_at = now(),
              settle_watched = true
         FROM (SELECT id, cancel_requested_by FROM app.tasks WHERE id = $1 FOR NO KEY UPDATE) prior
        WHERE t.id = prior.id AND ${NOT_ENDED}
        RETURNING prior.cancel_requested_by AS before`,
      [taskId, JSON.stringify(by)],
    );
    await c.query('SELECT pg_notify($1, $2)', [
      CHANNELS.control,
      JSON.stringify({ taskId, action: 'cancel', reason: by.reason }),
    ]);
    if (r.rowCount === 1 && same(r.rows[0]!.before)) return;
    await appendAuditInTransaction(c, event);
  });
}

/**
 * Inside a revocation's transaction: flags every active task of the principal for
 * cancellation with the revocation as its reason and tells their workers (on commit).
 * Returns the flagged task ids.
 */
export async function flagPrincipalTasks(
  tx: Queryable,
  p: { tenant: string; subject: string },
  by: CancelledBy,
): Promise<string[]> {
  const tasks = await tx.query<{ id: string }>(
    `UPDATE app.tasks SET cancel_requested_at = COALESCE(cancel_requested_at, now()),
            cancel_requested_by = $3, updated_at = now()
      WHERE tenant = $1 AND subject = $2 AND ${ACTIVE}
      RETURNING id`,
    [p.tenant, p.subject, JSON.stringify(by)],
  );
  for (const t of tasks.rows) {
    await tx.query('SELECT pg_notify($1, $2)', [
      CHANNELS.control,
      JSON.stringify({ taskId: t.id, action: 'revoke' }),
    ]);
  }
  return tasks.rows.map((t) => t.id);
}
