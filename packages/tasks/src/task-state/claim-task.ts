import type { Pool } from 'pg';
import { appendAuditInTransaction } from '@mtg/audit';
import { prepared, runPrepared, withTransaction, type Queryable } from '@mtg/db';
import { TASK_SELECT, type TaskRow } from '../task-row.ts';
import { ACTIVE } from './predicates.ts';
import {
  BOUNDARY_COLUMNS,
  boundaryOf,
  type Boundary,
  type BoundaryRow,
  type Lease,
} from './lease.ts';

export type ClaimOutcome =
  | {
      kind: 'claimed';
      lease: Lease;
      task: TaskRow;
      firstStart: boolean;
      /** The outputs of the steps already journaled, by step name (read with the claim). */
      journal: Map<string, unknown>;
      /** The boundary as the claim found it (cancel, deadline, revocation). */
      boundary: Boundary;
    }
  | { kind: 'held' } // a live worker holds it (duplicate delivery)
  | { kind: 'gone' } // terminal, purged or unknown: nothing to run
  // Not a tool (or not at the schema) this worker serves: it was not claimed.
  | { kind: 'unservable'; tool: string; toolFingerprint: string | null };

/**
 * Takes the task's lease: only when nobody holds a live one and, given `served` (tool name →
 * the schema fingerprint this worker runs), only for a tool this worker runs at the task's
 * schema. Bumping the epoch fences off the previous holder, whose later journal, result and
 * status writes then match nothing. The claim reads the task's journal in the same statement,
 * and the claim and its `task.started` / `task.lease_taken` event commit together: a worker
 * killed in between leaves neither, so every lease a task ever had is in the trail.
 */
export async function claimTask(
  pool: Pool,
  claim: {
    taskId: string;
    workerId: string;
    leaseMs: number;
    served?: ReadonlyMap<string, string>;
  },
): Promise<ClaimOutcome> {
  return withTransaction(pool, async (c) => {
    const claimed = await takeLease(c, claim);
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

/** The served map as the claim's jsonb parameter, built once per map (a worker has one). */
const servedJsonOf = new WeakMap<ReadonlyMap<string, string>, string>();
function servedJson(served: ReadonlyMap<string, string>): string {
  let json = servedJsonOf.get(served);
  if (json === undefined) {
    json = JSON.stringify(Object.fromEntries(served));
    servedJsonOf.set(served, json);
  }
  return json;
}

const TAKE_LEASE = prepared(
  `UPDATE app.tasks SET lease_owner = $2, lease_epoch = lease_epoch + 1,
          lease_expires_at = now() + $3 * interval '1 millisecond',
          attempts = attempts + 1, started_at = COALESCE(started_at, now()),
          status_message = CASE WHEN status_message = 'queued' THEN 'started' ELSE status_message END,
          updated_at = now()
    WHERE id = $1 AND ${ACTIVE}
      AND (lease_owner IS NULL OR lease_expires_at < now())
      AND ($4::jsonb IS NULL OR ($4::jsonb ? tool AND
           (tool_fingerprint IS NULL OR tool_fingerprint = $4::jsonb ->> tool)))
    RETURNING ${TASK_SELECT}, ${BOUNDARY_COLUMNS}, attempts = 1 AS first_start,
              (SELECT COALESCE(jsonb_object_agg(s.step, s.output), '{}'::jsonb)
                 FROM app.task_steps s WHERE s.task_id = $1) AS journal`,
);

async function takeLease(
  db: Queryable,
  claim: {
    taskId: string;
    workerId: string;
    leaseMs: number;
    served?: ReadonlyMap<string, string>;
  },
): Promise<ClaimOutcome> {
  const served = claim.served ? servedJson(claim.served) : null;
  const r = await runPrepared<
    TaskRow & BoundaryRow & { first_start: boolean; journal: Record<string, { value: unknown }> }
  >(db, TAKE_LEASE, [claim.taskId, claim.workerId, claim.leaseMs, served]);
  const row = r.rows[0];
  if (row) {
    const { journal, first_start, b_cancel, b_by, b_late, b_revoked, ...task } = row;
    return {
      kind: 'claimed',
      lease: { owner: claim.workerId, epoch: row.lease_epoch },
      task: task,
      boundary: boundaryOf({ b_cancel, b_by, b_late, b_revoked }),
      firstStart: first_start,
      journal: new Map(Object.entries(journal).map(([step, output]) => [step, output.value])),
    };
  }
  const s = await db.query<{ active: boolean; tool: string; tool_fingerprint: string | null }>(
    `SELECT ${ACTIVE} AS active, tool, tool_fingerprint FROM app.tasks WHERE id = $1`,
    [claim.taskId],
  );
  const t = s.rows[0];
  if (!t) return { kind: 'gone' };
  if (claim.served) {
    const fingerprint = claim.served.get(t.tool);
    if (fingerprint === undefined || (t.tool_fingerprint && t.tool_fingerprint !== fingerprint)) {
      return { kind: 'unservable', tool: t.tool, toolFingerprint: t.tool_fingerprint };
    }
  }
  return t.active ? { kind: 'held' } : { kind: 'gone' };
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
