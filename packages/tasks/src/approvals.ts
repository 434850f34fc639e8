import type { Clock } from '@mtg/clock';
import type { Pool } from 'pg';
import type { Principal } from '@mtg/identity';
import { deny, denyNotFound, type DenyDeps, type VerbContext } from './authorize-task.ts';
import { NOT_FOUND, taskError, type TaskOutcome } from './errors.ts';
import type { JobQueue } from './job-queue.ts';
import { TASK_ID } from './task-id.ts';
import { TASK_COLUMNS, type TaskRow } from './task-row.ts';
import { recordDecision } from './task-state/await-approval.ts';

/** An approval as its approvers see it: the tool, the owner, the argument summary, the reason. */
export interface ApprovalView {
  taskId: string;
  tool: string;
  owner: { subject: string; client: string };
  scope: string;
  reason: string;
  /** The tool's summary of what is to be approved (ctx.approval's `summary`). */
  summary: Record<string, unknown>;
  /** The task's argument summary, as every listing shows it. */
  arguments: Record<string, unknown>;
  requestedAt: string;
  deadline: string;
}

// Open: asked, undecided, and the task still parked on it (an active task is retained).
const OPEN = `q.kind = 'approval' AND q.answered_at IS NULL AND t.status = 'input_required'
              AND t.lease_owner IS NULL`;
const TASK_OF_T = TASK_COLUMNS.map((c) => `t.${c}`).join(', ');
const QUESTION_OF_Q = `q.key AS q_key, q.scope AS q_scope, q.message AS q_message,
                       q.summary AS q_summary, q.requested_at AS q_requested_at`;
// Decided by this approver ($3, as answered_by records them) with this decision ($4): the
// journaled step of the question holds it.
const DECIDED_BY = `q.kind = 'approval' AND q.answered_by = $3::jsonb
              AND EXISTS (SELECT 1 FROM app.task_steps s
                           WHERE s.task_id = q.task_id AND s.step = q.key
                             AND (s.output -> 'value' ->> 'approved')::boolean = $4)`;
type ApprovalRow = TaskRow & {
  q_key: string;
  q_scope: string;
  q_message: string;
  q_summary: Record<string, unknown>;
  q_requested_at: Date;
};

/**
 * The approvals a principal may decide: open ones of its own tenant, for a scope its token
 * holds, on tasks of other subjects (a requester never approves their own task, whatever the
 * client). Oldest first, at most 100.
 */
export async function listApprovals(pool: Pool, p: Principal): Promise<ApprovalView[]> {
  const r = await pool.query<{
    id: string;
    tool: string;
    subject: string;
    client: string;
    scope: string;
    message: string;
    summary: Record<string, unknown>;
    argument_summary: Record<string, unknown>;
    requested_at: Date;
    deadline: Date;
  }>(
    `SELECT t.id, t.tool, t.subject, t.client, q.scope, q.message, q.summary, t.argument_summary,
            q.requested_at, t.deadline
       FROM app.task_inputs q JOIN app.tasks t ON t.id = q.task_id
      WHERE t.tenant = $1 AND t.subject <> $2 AND q.scope = ANY($3) AND ${OPEN}
      ORDER BY q.requested_at, t.id LIMIT 100`,
    [p.tenant, p.subject, p.scopes],
  );
  return r.rows.map((row) => ({
    taskId: row.id,
    tool: row.tool,
    owner: { subject: row.subject, client: row.client },
    scope: row.scope,
    reason: row.message,
    summary: row.summary,
    arguments: row.argument_summary,
    requestedAt: row.requested_at.toISOString(),
    deadline: row.deadline.toISOString(),
  }));
}

/**
 * A second principal approves or rejects a task waiting for approval. Everything that is not
 * an open approval this principal may decide (another tenant's task, a scope the token lacks,
 * no approval waiting, no such task) gets the single not-found answer, audited with its real
 * reason; the requester deciding their own task is told so (`self_approval`): it is their
 * task, so that reveals nothing.
 */
export async function decideApproval(
  deps: DenyDeps & { queue: JobQueue; clock?: Clock },
  taskId: string,
  ctx: VerbContext,
  decision: { approved: boolean; reason?: string },
): Promise<TaskOutcome<{ approval: ApprovalView }>> {
  const p = ctx.principal;
  const verb = decision.approved ? 'approve' : 'reject';
  const found = TASK_ID.test(taskId)
    ? await deps.pool.query<ApprovalRow>(
        `SELECT ${TASK_OF_T}, ${QUESTION_OF_Q}
           FROM app.task_inputs q JOIN app.tasks t ON t.id = q.task_id
          WHERE t.id = $1 AND ${OPEN} ORDER BY q.requested_at LIMIT 1`,
        [taskId],
      )
    : undefined;
  const row = found?.rows[0];
  if (!row) {
    // The retry of a decision whose answer was lost (its commit's outcome unknown, answered
    // "unavailable"): this approver's same decision is recorded, so the retry gets the
    // answer the first attempt would have, and nothing is written again.
    const mine = TASK_ID.test(taskId)
      ? await deps.pool.query<ApprovalRow>(
          `SELECT ${TASK_OF_T}, ${QUESTION_OF_Q}
             FROM app.task_inputs q JOIN app.tasks t ON t.id = q.task_id
            WHERE t.id = $1 AND t.tenant = $2 AND ${DECIDED_BY}
            ORDER BY q.answered_at DESC LIMIT 1`,
          [
            taskId,
            p.tenant,
            JSON.stringify({ subject: p.subject, client: p.client }),
            decision.approved,
          ],
        )
      : undefined;
    if (mine?.rows[0]) return { ok: true, approval: approvalView(mine.rows[0]) };
  }
  if (!row || row.tenant !== p.tenant) {
    await denyNotFound(deps, ctx, verb, taskId, row ? 'cross_tenant' : 'no_open_approval');
    return NOT_FOUND;
  }
  if (ctx.admitTool && !ctx.admitTool(row.tool)) {
    await deny(deps, ctx, verb, taskId, 'policy_denied', row.tool);
    return NOT_FOUND;
  }
  if (!p.scopes.includes(row.q_scope)) {
    await deny(deps, ctx, verb, taskId, 'approver_scope_missing', row.tool);
    return NOT_FOUND;
  }
  if (row.subject === p.subject) {
    await deny(deps, ctx, verb, taskId, 'self_approval', row.tool);
    return taskError(
      'approval_refused',
      'You requested this task: a different person must approve or reject it',
    );
  }
  const outcome = await recordDecision(deps, {
    task: row,
    key: row.q_key,
    approved: decision.approved,
    ...(decision.reason ? { reason: decision.reason } : {}),
    approver: { subject: p.subject, client: p.client },
    correlationId: ctx.correlationId,
    wire: ctx.wire,
  });
  if (outcome === 'approver_revoked') {
    await deny(deps, ctx, verb, taskId, 'approver_revoked', row.tool);
    return taskError('principal_revoked', 'Your access has been revoked');
  }
  if (outcome === 'not_waiting') {
    await denyNotFound(deps, ctx, verb, taskId, 'no_open_approval');
    return NOT_FOUND;
  }
  return { ok: true, approval: approvalView(row) };
}

function approvalView(row: ApprovalRow): ApprovalView {
  return {
    taskId: row.id,
    tool: row.tool,
    owner: { subject: row.subject, client: row.client },
    scope: row.q_scope,
    reason: row.q_message,
    summary: row.q_summary,
    arguments: row.argument_summary,
    requestedAt: row.q_requested_at.toISOString(),
    deadline: row.deadline.toISOString(),
  };
}
