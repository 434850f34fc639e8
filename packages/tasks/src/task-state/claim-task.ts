import type { Pool } from 'pg';
import { appendAuditInTransaction } from '@mtg/audit';
import { withTransaction, type Queryable } from '@mtg/db';
import type { TaskRow } from '../task-row.ts';
import { ACTIVE } from './predicates.ts';
import type { Lease } from './lease.ts';

export type ClaimOutcome =
  | { kind: 'claimed'; lease: Lease; task: TaskRow; firstStart: boolean }
  | { kind: 'held' } // a live worker holds it (duplicate delivery)
  | { kind: 'gone' }; // terminal, purged or unknown: nothing to run

/**
 * Takes the task's lease: only when nobody holds a live one. Bumping the epoch fences off
 * the previous holder, whose later journal, result and status writes then match nothing.
 * The claim and its `task.started` / `task.lease_taken` event commit together: a worker
 * killed in between leaves neither, so every lease a task ever had is in the trail.
 */
export async function claimTask(
  pool: Pool,
  claim: { taskId: string; workerId: string; leaseMs: number },
): Promise<ClaimOutcome> {
  return withTransaction(pool, async (c) => {
    const claimed = await takeLease(c, claim.taskId, claim.workerId, claim.leaseMs);
    if (claimed.kind === 'claimed') {
      await appendAuditInTransaction(c, {
        type: claimed.firstStart ? 'task.started' : 'task.lease_taken',
        taskId: claim.taskId,
        tenant: claimed.task.tenant,
        subject: claimed.task.subject,
        client: claimed.task.client,
        tool: claimed.task.tool,
        correlationId: claimed.task.correlation_id,
        actor: { subject: claim.workerId, kind: 'worker' },
        data: {
          worker: claim.workerId,
          epoch: claimed.lease.epoch,
          attempt: claimed.task.attempts,
        },
      });
    }
    return claimed;
  });
}

async function takeLease(
  db: Queryable,
  taskId: string,
  owner: string,
  leaseMs: number,
): Promise<ClaimOutcome> {
  const r = await db.query<TaskRow & { first_start: boolean }>(
    `UPDATE app.tasks SET lease_owner = $2, lease_epoch = lease_epoch + 1,
            lease_expires_at = now() + $3 * interval '1 millisecond',
            attempts = attempts + 1, started_at = COALESCE(started_at, now()),
            status_message = CASE WHEN status_message = 'queued' THEN 'started' ELSE status_message END,
            updated_at = now()
      WHERE id = $1 AND ${ACTIVE}
        AND (lease_owner IS NULL OR lease_expires_at < now())
      RETURNING *, attempts = 1 AS first_start`,
    [taskId, owner, leaseMs],
  );
  const row = r.rows[0];
  if (row) {
    return {
      kind: 'claimed',
      lease: { owner, epoch: row.lease_epoch },
      task: row,
      firstStart: row.first_start,
    };
  }
  const s = await db.query<{ active: boolean }>(
    `SELECT ${ACTIVE} AS active FROM app.tasks WHERE id = $1`,
    [taskId],
  );
  return s.rows[0]?.active ? { kind: 'held' } : { kind: 'gone' };
}

/** Which tool, at which schema, a task needs; undefined once the task is gone. */
export async function placementOf(
  db: Queryable,
  taskId: string,
): Promise<{ tool: string; tool_fingerprint: string | null } | undefined> {
  const r = await db.query<{ tool: string; tool_fingerprint: string | null }>(
    `SELECT tool, tool_fingerprint FROM app.tasks WHERE id = $1`,
    [taskId],
  );
  return r.rows[0];
}

/**
 * A queued task a worker will not run (not its tool, or another schema) says what it waits
 * for; only while nobody holds it.
 */
export async function noteWaitingForWorker(
  db: Queryable,
  taskId: string,
  message: string,
): Promise<void> {
  await db.query(
    `UPDATE app.tasks SET status_message = $2, updated_at = now()
      WHERE id = $1 AND status = 'working' AND lease_owner IS NULL`,
    [taskId, message],
  );
}
