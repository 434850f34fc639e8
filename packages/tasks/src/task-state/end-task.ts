import type { Pool, PoolClient } from 'pg';
import { appendAuditInTransaction, type AuditEvent } from '@mtg/audit';
import { prepared, runPrepared, withTransaction } from '@mtg/db';
import type { TaskRow } from '../task-row.ts';
import { ACTIVE, LIVE_LEASE, fenced } from './predicates.ts';
import type { Lease } from './lease.ts';
import { settleTask, type OnTaskEnded, type Settlement } from './settle-task.ts';

/** What an ending needs: the pool it opens its transaction on, and the hook it fires. */
export interface EndDeps {
  pool: Pool;
  /** Fired once the ending committed (by the process that ended the task). */
  onTaskEnded?: OnTaskEnded;
  /**
   * More work of the ending's own transaction, after the settlement and before its audit
   * event (a worker completes the task's job there: one commit fewer per task).
   */
  withEnding?: (tx: PoolClient) => Promise<void>;
}

/** Who and what a task's audit events are about, as its row records them. */
export function aboutTask(row: TaskRow) {
  return {
    taskId: row.id,
    tenant: row.tenant,
    subject: row.subject,
    client: row.client,
    tool: row.tool,
    correlationId: row.correlation_id,
  };
}

const durationMs = (row: TaskRow) => row.ended_at!.getTime() - row.created_at.getTime();

/**
 * The one way a task ends: settle, then its audit event, in one transaction; then, after
 * commit, the hook. `before` runs first in the same transaction (a completion's result
 * insert, a check that no live worker holds the task); when it returns false nothing ends.
 */
async function endTask(
  deps: EndDeps,
  settlement: Settlement,
  event: (row: TaskRow) => AuditEvent,
  before?: (c: PoolClient) => Promise<boolean>,
  /** What `before` wrote must not commit without the settlement (a completion's result). */
  mustSettle = false,
): Promise<TaskRow | undefined> {
  const ended = await withTransaction(deps.pool, async (c) => {
    if (before && !(await before(c))) return undefined;
    const row = await settleTask(c, settlement);
    if (!row) {
      if (mustSettle) throw new Error('settle refused after a fenced result insert'); // rolls back
      return undefined;
    }
    await deps.withEnding?.(c);
    await appendAuditInTransaction(c, event(row));
    return row;
  });
  if (ended) deps.onTaskEnded?.(ended);
  return ended;
}

const STORE_RESULT = prepared(
  `INSERT INTO app.task_results (task_id, result, is_error, size_bytes, expires_at, delete_on_read)
   SELECT id, $4, $5, $6, now() + ttl_ms * interval '1 millisecond', $7 FROM app.tasks
    WHERE id = $1 AND ${fenced('$2', '$3')} AND ${ACTIVE}`,
);

/** A tool result as the worker stores it. */
export interface FinishedResult {
  result: { content: unknown[]; structuredContent?: Record<string, unknown>; isError?: boolean };
  text: string;
  sizeBytes: number;
  deleteOnRead: boolean;
}

/**
 * working → completed, by the lease holder: the result row and the settlement in one fenced
 * transaction (a stale worker's result is never stored), then `task.completed`.
 */
export async function completeTask(
  deps: EndDeps,
  c: {
    taskId: string;
    lease: Lease;
    workerId: string;
    finished: FinishedResult;
    runMs: number;
    downstreamSystems: string[];
  },
): Promise<TaskRow | undefined> {
  const isError = c.finished.result.isError === true;
  return endTask(
    deps,
    {
      taskId: c.taskId,
      status: 'completed',
      outcome: isError ? 'tool_error' : 'completed',
      message: isError ? 'Completed with a tool error' : 'Completed',
      endedBy: { path: 'worker', worker: c.workerId },
      lease: c.lease,
    },
    (row) => ({
      type: 'task.completed',
      ...aboutTask(row),
      reason: isError ? 'tool_error' : 'success',
      data: {
        outcome: isError ? 'tool_error' : 'success',
        durationMs: durationMs(row),
        runMs: c.runMs,
        resultBytes: c.finished.sizeBytes,
        downstreamSystems: c.downstreamSystems,
        attempts: row.attempts,
      },
    }),
    async (tx) => {
      const stored = await runPrepared(tx, STORE_RESULT, [
        c.taskId,
        c.lease.owner,
        c.lease.epoch,
        c.finished.text,
        isError,
        c.finished.sizeBytes,
        c.finished.deleteOnRead,
      ]);
      return stored.rowCount === 1;
    },
    true,
  );
}

/** working → failed, by the lease holder (its error, its deadline, its delegation, its result). */
export async function failTask(
  deps: EndDeps,
  f: { taskId: string; lease: Lease; workerId: string; outcome: string; message: string },
): Promise<TaskRow | undefined> {
  return endTask(
    deps,
    {
      taskId: f.taskId,
      status: 'failed',
      outcome: f.outcome,
      message: f.message,
      endedBy: { path: f.outcome === 'deadline' ? 'deadline' : 'worker', worker: f.workerId },
      lease: f.lease,
    },
    (row) => ({
      type: 'task.failed',
      ...aboutTask(row),
      reason: f.outcome,
      data: { message: f.message, durationMs: durationMs(row), attempts: row.attempts },
    }),
  );
}

/** working → failed at its deadline, by the sweep, for a task no live worker holds. */
export async function expireTask(
  deps: EndDeps,
  taskId: string,
  message: string,
): Promise<TaskRow | undefined> {
  return endTask(
    deps,
    { taskId, status: 'failed', outcome: 'deadline', message, endedBy: { path: 'deadline' } },
    (row) => ({
      type: 'task.failed',
      ...aboutTask(row),
      reason: 'deadline',
      actor: { subject: 'deadline-sweeper', kind: 'system' },
      data: { durationMs: durationMs(row), deadline: row.deadline.toISOString() },
    }),
  );
}

/** Who asked for a cancel: owner, admin, or a revocation (`path`), and why. */
export type CancelledBy = Record<string, unknown> & {
  path: string;
  reason?: string;
  subject?: string;
  client?: string;
};

/**
 * active → cancelled: by the worker holding the lease (it stopped), or from outside (no live
 * worker holds it, or none answered), which bumps the epoch. `onlyUnleased`: only when no
 * live worker holds it, checked in the same transaction. Writes `task.cancelled` (or
 * `task.admin_cancelled`), with `settledBy` saying which path settled it.
 */
export async function cancelTaskNow(
  deps: EndDeps,
  c: {
    taskId: string;
    by: CancelledBy;
    message: string;
    settledBy: string;
    lease?: Lease;
    onlyUnleased?: boolean;
  },
): Promise<TaskRow | undefined> {
  return endTask(
    deps,
    {
      taskId: c.taskId,
      status: 'cancelled',
      outcome: c.by.path === 'revocation' ? 'revoked' : 'cancelled',
      message: c.message,
      endedBy: c.by,
      ...(c.lease ? { lease: c.lease } : {}),
    },
    (row) => cancelledEvent(row, c.by, c.settledBy),
    c.onlyUnleased
      ? async (tx) => {
          const live = await tx.query<{ live: boolean }>(
            `SELECT ${LIVE_LEASE} AS live FROM app.tasks WHERE id = $1`,
            [c.taskId],
          );
          return !live.rows[0]?.live;
        }
      : undefined,
  );
}

function cancelledEvent(row: TaskRow, by: CancelledBy, settledBy: string): AuditEvent {
  return {
    type: by.path === 'admin' ? 'task.admin_cancelled' : 'task.cancelled',
    ...aboutTask(row),
    reason: by.path === 'revocation' ? 'revoked' : String(by.path),
    actor: {
      subject: String(by.subject ?? 'system'),
      ...(by.client ? { client: String(by.client) } : {}),
      kind: by.path === 'admin' ? 'admin' : by.path === 'owner' ? 'user' : 'system',
    },
    data: {
      settledBy,
      note: by.reason,
      durationMs: row.ended_at && row.created_at ? durationMs(row) : undefined,
    },
  };
}

/**
 * working → input_required (checkpoint mode): the stage has no grant, so the lease is given
 * back and the task waits for its owner with a fresh token. Writes `task.paused`.
 */
export async function pauseTask(
  pool: Pool,
  p: { task: TaskRow; lease: Lease; workerId: string },
): Promise<boolean> {
  return withTransaction(pool, async (c) => {
    const r = await c.query(
      `UPDATE app.tasks SET status = 'input_required', lease_owner = NULL, lease_expires_at = NULL,
              status_message = 'Waiting for the owner: this tool needs a live user at each stage. Poll the task with a fresh token to continue.',
              updated_at = now()
        WHERE id = $1 AND ${fenced('$2', '$3')} AND status = 'working'`,
      [p.task.id, p.lease.owner, p.lease.epoch],
    );
    if (r.rowCount !== 1) return false;
    await appendAuditInTransaction(c, {
      type: 'task.paused',
      ...aboutTask(p.task),
      reason: 'live_user_required',
      data: { worker: p.workerId },
    });
    return true;
  });
}
