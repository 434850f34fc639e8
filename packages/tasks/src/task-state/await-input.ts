import type { Pool } from 'pg';
import { appendAuditInTransaction } from '@mtg/audit';
import { withTransaction } from '@mtg/db';
import type { TaskRow } from '../task-row.ts';
import { aboutTask } from './about-task.ts';
import { fenced } from './predicates.ts';
import type { Lease } from './lease.ts';

/**
 * working ⇄ input_required while the lease holder keeps its lease: a downstream the run
 * follows (an upstream MCP task) waits for input, so the task shows input_required with the
 * downstream's message, and working again once the downstream goes on. Unlike checkpoint
 * mode (pauseTask), the lease stays the run's: the worker keeps polling, renews, and cancel,
 * deadline and revocation reach it as for any running task. Each change of status writes
 * `task.input_required` / `task.input_resolved` in the same transaction; a repeat of the
 * current status only refreshes the message (no transition, no event). Returns whether the
 * row is now in the asked status (false: the lease is no longer the writer's, or the task
 * ended).
 */
export async function markInputRequired(
  pool: Pool,
  m: {
    task: TaskRow;
    lease: Lease;
    workerId: string;
    /** null: the input came, back to working. */
    message: string | null;
    /** Who waits for the input (`upstream:<name>`), for the audit event. */
    downstream: string;
  },
): Promise<boolean> {
  const to = m.message === null ? 'working' : 'input_required';
  const from = m.message === null ? 'input_required' : 'working';
  return withTransaction(pool, async (c) => {
    const moved = await c.query(
      `UPDATE app.tasks SET status = $4, status_message = COALESCE($5, status_message), updated_at = now()
        WHERE id = $1 AND ${fenced('$2', '$3')} AND status = $6 AND NOT needs_live_user`,
      [m.task.id, m.lease.owner, m.lease.epoch, to, m.message, from],
    );
    if (moved.rowCount === 1) {
      await appendAuditInTransaction(c, {
        type: to === 'input_required' ? 'task.input_required' : 'task.input_resolved',
        ...aboutTask(m.task),
        reason: to === 'input_required' ? 'downstream_input_required' : 'downstream_resumed',
        actor: { subject: m.workerId, kind: 'worker' },
        data: { worker: m.workerId, downstream: m.downstream },
      });
      return true;
    }
    // Already there (a resumed run finds the status its predecessor wrote): a new message only.
    const same = await c.query<{ changed: boolean }>(
      `SELECT status_message IS DISTINCT FROM COALESCE($5, status_message) AS changed FROM app.tasks
        WHERE id = $1 AND ${fenced('$2', '$3')} AND status = $4`,
      [m.task.id, m.lease.owner, m.lease.epoch, to, m.message],
    );
    if (!same.rows[0]) return false;
    if (same.rows[0].changed) {
      await c.query(
        `UPDATE app.tasks SET status_message = $4, updated_at = now()
          WHERE id = $1 AND ${fenced('$2', '$3')}`,
        [m.task.id, m.lease.owner, m.lease.epoch, m.message],
      );
    }
    return true;
  });
}
