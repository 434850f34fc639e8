import type { Pool } from 'pg';
import { appendAuditInTransaction, type AuditEvent } from '@mtg/audit';
import { withTransaction, type Queryable } from '@mtg/db';
import { CHANNELS } from '../channels.ts';
import { ACTIVE } from './predicates.ts';
import type { CancelledBy } from './end-task.ts';

/**
 * Flags an active task for cancellation (the first request's who and why stand), tells its
 * worker at once (`mtg_task_control`, delivered at commit) and writes `task.cancel_requested`,
 * in one transaction. The task ends when its worker (or the caller, cancelTaskNow) settles it.
 */
export async function requestCancel(
  pool: Pool,
  taskId: string,
  by: CancelledBy & { reason: string },
  event: AuditEvent,
): Promise<void> {
  await withTransaction(pool, async (c) => {
    await c.query(
      `UPDATE app.tasks SET cancel_requested_at = COALESCE(cancel_requested_at, now()),
              cancel_requested_by = COALESCE(cancel_requested_by, $2), updated_at = now()
        WHERE id = $1 AND ${ACTIVE}`,
      [taskId, JSON.stringify(by)],
    );
    await c.query('SELECT pg_notify($1, $2)', [
      CHANNELS.control,
      JSON.stringify({ taskId, action: 'cancel', reason: by.reason }),
    ]);
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
