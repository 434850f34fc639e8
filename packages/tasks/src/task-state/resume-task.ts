import { nowMs, type Clock } from '@mtg/clock';
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { appendAuditInTransaction } from '@mtg/audit';
import { withTransaction } from '@mtg/db';
import type { VerbContext } from '../authorize-task.ts';
import { CHANNELS } from '../channels.ts';
import {
  obtainDelegation,
  storeDelegation,
  type Delegation,
  type DelegationDeps,
} from '../delegate-task.ts';
import type { JobQueue } from '../job-queue.ts';
import type { TaskRow, VerbTaskRow } from '../task-row.ts';

/**
 * Checkpoint mode: a task paused for a live user resumes when its owner (already authorized
 * by the caller) comes back with a live token. The token is exchanged for a fresh
 * delegation, one more stage is granted and a job enqueued, in one transaction. Returns the
 * row as it now is (unchanged when there is nothing to resume or the IdP refuses). A task
 * that is input_required because a downstream waits (markInputRequired) is not paused: its
 * worker still holds it, and it is never resumed here.
 */
export async function resumeIfPaused(
  deps: { pool: Pool; queue: JobQueue; delegation?: DelegationDeps; clock?: Clock },
  row: VerbTaskRow,
  scope: string,
  ctx: VerbContext,
): Promise<VerbTaskRow> {
  if (row.status !== 'input_required' || !row.needs_live_user || !ctx.token) return row;
  const remainingMs = row.deadline.getTime() - nowMs(deps.clock);
  if (remainingMs <= 0) return row; // the deadline sweep ends it
  let delegation: Delegation | undefined;
  if (deps.delegation) {
    const d = await obtainDelegation(deps.delegation, ctx.token, scope, remainingMs);
    if (!d.ok) return row;
    delegation = d.delegation;
  }
  const jobId = randomUUID();
  return withTransaction(deps.pool, async (c) => {
    const r = await c.query<TaskRow>(
      `UPDATE app.tasks SET status = 'working', stage_grants = stage_grants + 1, job_id = $2,
              status_message = 'Resumed by the owner', updated_at = now()
        WHERE id = $1 AND status = 'input_required' AND needs_live_user AND lease_owner IS NULL
        RETURNING *`,
      [row.id, jobId],
    );
    const resumed = r.rows[0];
    if (!resumed) return row;
    if (delegation) await storeDelegation(c, deps.delegation!.cipher, row.id, delegation);
    await deps.queue.enqueue(c, {
      queue: row.job_queue,
      taskId: row.id,
      jobId,
      expireInSeconds: Math.ceil(remainingMs / 1000) + 60,
    });
    await c.query('SELECT pg_notify($1, $2)', [
      CHANNELS.created,
      JSON.stringify({ taskId: row.id, queue: row.job_queue }),
    ]);
    await appendAuditInTransaction(c, {
      type: 'task.resumed',
      taskId: row.id,
      tenant: row.tenant,
      subject: row.subject,
      client: row.client,
      tool: row.tool,
      correlationId: ctx.correlationId,
      actor: { subject: ctx.principal.subject, client: ctx.principal.client, kind: 'user' },
      data: {
        wire: ctx.wire,
        delegationRefreshed: delegation !== undefined,
        ...(delegation ? { expiresAt: new Date(delegation.expiresAt).toISOString() } : {}),
      },
    });
    return resumed;
  });
}
