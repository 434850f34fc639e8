import { nowMs, type Clock } from '@mtg/clock';
import { authorizeTask, deny, type DenyDeps, type VerbContext } from './authorize-task.ts';
import { CHANNELS } from './channels.ts';
import { taskError, type TaskOutcome } from './errors.ts';
import type { TaskEvents } from './task-events.ts';
import { TASK_ID } from './task-id.ts';
import {
  isTerminal,
  TASK_SELECT,
  toView,
  type TaskRow,
  type TaskView,
  type VerbTaskRow,
} from './task-row.ts';
import { cancelTaskNow, type CancelledBy } from './task-state/end-task.ts';
import { LIVE_LEASE, RETAINED } from './task-state/predicates.ts';
import { requestCancel } from './task-state/request-cancel.ts';
import type { OnTaskEnded } from './task-state/settle-task.ts';

export interface CancelOptions {
  reason?: string;
}

export const ADMIN_SCOPE = 'tasks:admin';

interface CancelDeps extends DenyDeps {
  events: TaskEvents;
  cancelAckTimeoutMs: number;
  onTaskEnded?: OnTaskEnded;
  /** Paces the wait for the worker's acknowledgement (default: the system clock). */
  clock?: Clock;
}

/**
 * Cancels a task and returns only once the stop is acknowledged: the running worker
 * settles it (after its in-flight downstream calls ended), or — when no live worker holds
 * it, or the worker does not answer within the bound — the row is settled here and the
 * lease epoch bumped, so the stale worker's later writes are refused. After this returns,
 * no further step of the task is recorded and no downstream write is issued.
 */
export async function cancelTask(
  deps: CancelDeps,
  scopeOf: (tool: string) => string | undefined,
  taskId: string,
  ctx: VerbContext,
  options: CancelOptions,
): Promise<TaskOutcome<{ task: TaskView }>> {
  const p = ctx.principal;
  let task: VerbTaskRow;
  let path: 'owner' | 'admin' = 'owner';
  // The administrator path is decided before the owner check: an operator cancelling someone
  // else's task is not refused anything, so the owner check must not audit a denial for it.
  const foreign = await foreignTaskForAdmin(deps, taskId, ctx);
  if (foreign) {
    task = foreign;
    path = 'admin';
  } else {
    const own = await authorizeTask(deps, taskId, 'cancel', ctx, scopeOf);
    if (!own.ok) return own;
    task = own.task;
  }
  const by = {
    path,
    subject: p.subject,
    client: p.client,
    tenant: p.tenant,
    reason:
      options.reason ?? (path === 'admin' ? 'cancelled by administrator' : 'cancelled by owner'),
  };
  if (isTerminal(task.status)) {
    // The retry of a cancel whose answer was lost (its commit's outcome unknown to the
    // gateway, answered "unavailable"): the task ended by this very request, so it gets the
    // answer the first attempt would have, not a refusal.
    if (task.status === 'cancelled' && sameCancelRequest(task.ended_by, by)) {
      return { ok: true, task: toView(task) };
    }
    return taskError('task_terminal', `Task already ${task.status}; it cannot be cancelled`);
  }
  await requestCancel(
    deps.pool,
    taskId,
    by,
    {
      type: 'task.cancel_requested',
      taskId,
      tenant: task.tenant,
      subject: task.subject,
      client: task.client,
      tool: task.tool,
      reason: path,
      correlationId: ctx.correlationId,
      actor: { subject: p.subject, client: p.client, kind: path === 'admin' ? 'admin' : 'user' },
      data: { wire: ctx.wire, note: by.reason },
    },
    (recorded) => sameCancelRequest(recorded, by),
  );

  const settled = await awaitStop(deps, task, by);
  const finalRow =
    settled ??
    (await deps.pool.query<TaskRow>('SELECT * FROM app.tasks WHERE id = $1', [taskId])).rows[0]!;
  return { ok: true, task: toView(finalRow) };
}

/**
 * For a caller holding the administrator scope: the retained task of their own tenant that
 * is not their own (another subject or client), or undefined — then the owner check decides,
 * and a refusal there is a real one (another tenant, unknown id), audited as a denial.
 */
async function foreignTaskForAdmin(
  deps: CancelDeps,
  taskId: string,
  ctx: VerbContext,
): Promise<TaskRow | undefined> {
  const p = ctx.principal;
  if (!p.scopes.includes(ADMIN_SCOPE) || !TASK_ID.test(taskId)) return undefined;
  const r = await deps.pool.query<TaskRow>(
    `SELECT ${TASK_SELECT} FROM app.tasks
      WHERE id = $1 AND tenant = $2 AND NOT (subject = $3 AND client = $4) AND ${RETAINED}`,
    [taskId, p.tenant, p.subject, p.client],
  );
  return r.rows[0];
}

async function awaitStop(
  deps: CancelDeps,
  task: VerbTaskRow,
  by: CancelledBy & { reason: string },
): Promise<TaskRow | undefined> {
  const deadline = nowMs(deps.clock) + deps.cancelAckTimeoutMs;
  for (;;) {
    const r = await deps.pool.query<TaskRow & { live: boolean }>(
      `SELECT ${TASK_SELECT}, ${LIVE_LEASE} AS live FROM app.tasks WHERE id = $1`,
      [task.id],
    );
    const row = r.rows[0]!;
    if (isTerminal(row.status)) return row;
    if (!row.live || nowMs(deps.clock) >= deadline) {
      // Nobody is running it (queued, or its worker died), or the worker did not answer in
      // time: stop it here. The epoch bump fences off any worker that still holds it.
      const settled = await cancelTaskNow(deps, {
        taskId: task.id,
        by,
        message: `Cancelled: ${by.reason}`,
        settledBy: row.live ? 'ack_timeout' : 'no_live_worker',
      });
      if (settled) return settled;
      continue; // a worker settled it meanwhile; re-read
    }
    await deps.events.waitForSettled(
      task.id,
      Math.min(250, deadline - nowMs(deps.clock)),
      CHANNELS.settled,
    );
  }
}

/**
 * The same cancel request: who asked, by which path, with which reason. Its idempotency key,
 * as the task row records it (the first request's `cancel_requested_by`, then `ended_by`).
 */
export function sameCancelRequest(
  recorded: Record<string, unknown> | null | undefined,
  by: CancelledBy & { reason: string },
): boolean {
  return (
    !!recorded &&
    (['path', 'subject', 'client', 'tenant', 'reason'] as const).every((k) => recorded[k] === by[k])
  );
}

export { deny };
