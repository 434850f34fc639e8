import type { Clock } from '@mtg/clock';
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { appendAuditInTransaction } from '@mtg/audit';
import { withTransaction } from '@mtg/db';
import { boundSummary } from '../bound-summary.ts';
import { journalAnswerAndRequeue } from './journal-answer.ts';
import type { JobQueue } from '../job-queue.ts';
import type { TaskRow } from '../task-row.ts';
import { aboutTask } from './about-task.ts';
import { fenced, NOT_ENDED } from './predicates.ts';
import type { Lease } from './lease.ts';

/**
 * working → input_required, parked for a second person (ctx.approval): as parkForInput, but
 * what is awaited is a decision by another principal of the tenant holding `scope`; audited
 * `task.approval_requested` with the reason and the tool's summary, once per approval.
 */
export async function parkForApproval(
  pool: Pool,
  p: {
    task: TaskRow;
    lease: Lease;
    workerId: string;
    key: string;
    scope: string;
    reason: string;
    summary: Record<string, unknown>;
  },
): Promise<boolean> {
  return withTransaction(pool, async (c) => {
    const moved = await c.query(
      `UPDATE app.tasks SET status = 'input_required', lease_owner = NULL, lease_expires_at = NULL,
              status_message = $4, updated_at = now()
        WHERE id = $1 AND ${fenced('$2', '$3')} AND ${NOT_ENDED}
          AND NOT needs_live_user`,
      [
        p.task.id,
        p.lease.owner,
        p.lease.epoch,
        `Waiting for approval by a second person holding ${p.scope}: ${p.reason}`.slice(0, 500),
      ],
    );
    if (moved.rowCount !== 1) return false;
    const asked = await c.query(
      `INSERT INTO app.task_inputs (task_id, key, kind, message, schema, scope, summary)
       VALUES ($1, $2, 'approval', $3, '{}', $4, $5) ON CONFLICT (task_id, key) DO NOTHING`,
      [p.task.id, p.key, p.reason, p.scope, JSON.stringify(boundSummary(p.summary))],
    );
    if (asked.rowCount === 1) {
      await appendAuditInTransaction(c, {
        type: 'task.approval_requested',
        ...aboutTask(p.task),
        reason: 'tool_asked',
        actor: { subject: p.workerId, kind: 'worker' },
        data: {
          key: p.key,
          scope: p.scope,
          reason: p.reason.slice(0, 200),
          summary: boundSummary(p.summary),
        },
      });
    }
    return true;
  });
}

/** What a decision did: recorded, or why not (the task is no longer waiting, or the approver was revoked). */
export type DecisionOutcome = 'recorded' | 'not_waiting' | 'approver_revoked';

/**
 * input_required → working: a second principal's decision (already authorized: same tenant,
 * another subject, the approval's scope) is journaled as the approval step, the approval
 * closed, a job enqueued, and `task.approved` / `task.rejected` written naming the approver,
 * in one transaction. The approver's revocation is read in the same transaction (FOR SHARE,
 * against the revocation's own UPDATE), so a revocation that commits first voids the
 * decision. The run ends a rejected task with the rejection's reason.
 */
export async function recordDecision(
  deps: { pool: Pool; queue: JobQueue; clock?: Clock },
  d: {
    task: TaskRow;
    key: string;
    approved: boolean;
    reason?: string;
    approver: { subject: string; client: string };
    correlationId: string;
    wire: string;
  },
): Promise<DecisionOutcome> {
  const jobId = randomUUID();
  return withTransaction(deps.pool, async (c) => {
    const revoked = await c.query(
      `SELECT 1 FROM app.principals WHERE tenant = $1 AND subject = $2 AND revoked FOR SHARE`,
      [d.task.tenant, d.approver.subject],
    );
    if (revoked.rowCount) return 'approver_revoked';
    const resumed = await c.query<{ deadline: Date; job_queue: string }>(
      `UPDATE app.tasks SET status = 'working', job_id = $2, updated_at = now(),
              status_message = $4
        WHERE id = $1 AND status = 'input_required' AND lease_owner IS NULL AND NOT needs_live_user
          AND EXISTS (SELECT 1 FROM app.task_inputs
                       WHERE task_id = $1 AND key = $3 AND kind = 'approval' AND answered_at IS NULL)
        RETURNING deadline, job_queue`,
      [
        d.task.id,
        jobId,
        d.key,
        d.approved ? `Approved by ${d.approver.subject}` : `Rejected by ${d.approver.subject}`,
      ],
    );
    const row = resumed.rows[0];
    if (!row) return 'not_waiting';
    const decision = {
      approved: d.approved,
      approver: d.approver,
      ...(d.reason ? { reason: d.reason } : {}),
    };
    const closed = await c.query<{ requested_at: Date }>(
      `UPDATE app.task_inputs SET answered_at = now(), answered_by = $3
        WHERE task_id = $1 AND key = $2 RETURNING requested_at`,
      [d.task.id, d.key, JSON.stringify(d.approver)],
    );
    await journalAnswerAndRequeue(c, deps.queue, {
      taskId: d.task.id,
      key: d.key,
      output: decision,
      askedAt: closed.rows[0]!.requested_at,
      jobId,
      jobQueue: row.job_queue,
      deadline: row.deadline,
      clock: deps.clock,
    });
    await appendAuditInTransaction(c, {
      type: d.approved ? 'task.approved' : 'task.rejected',
      ...aboutTask(d.task),
      correlationId: d.correlationId,
      actor: { subject: d.approver.subject, client: d.approver.client, kind: 'user' },
      data: {
        key: d.key,
        wire: d.wire,
        approver: d.approver,
        ...(d.reason ? { reason: d.reason.slice(0, 500) } : {}),
      },
    });
    return 'recorded';
  });
}
