import type { Pool } from 'pg';
import { appendEventSql, auditAppendTemplate, filledAuditBody, filledBySql } from '@mtg/audit';
import { prepared, runPrepared, type Queryable } from '@mtg/db';
import type { SealedCredential } from '@mtg/identity';
import { TASK_SELECT, type TaskRow } from '../task-row.ts';
import { ABOUT_FILLED, aboutFilledValues } from './about-task.ts';
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
      /** The task's sealed delegation as the claim read it; null: the task has none. */
      delegation: ClaimedDelegation | null;
    }
  | { kind: 'held' } // a live worker holds it (duplicate delivery)
  | { kind: 'gone' } // terminal, purged or unknown: nothing to run
  // Not a tool (or not at the schema) this worker serves: it was not claimed.
  | { kind: 'unservable'; tool: string; toolFingerprint: string | null };

/**
 * The sealed delegation read with the claim, and how long it had left then by the database's
 * clock (its bound is the task's deadline): the run's first exchange needs no read of its own.
 */
export interface ClaimedDelegation {
  sealed: SealedCredential;
  remainingMs: number;
}

// The joined app.task_credentials row: every column null when the task has none (its columns
// are NOT NULL, so d_key_id alone tells).
interface DelegationColumns {
  d_key_id: string | null;
  d_iv: Buffer;
  d_ciphertext: Buffer;
  d_tag: Buffer;
  d_remaining_ms: number;
}

/**
 * The claim's event, cut where the statement fills in what the claim takes (the epoch, the
 * attempt) and who the task is about (the claimed row's owner and tool); its type is
 * `task.started` on a first claim, `task.lease_taken` after (the statement decides).
 */
function claimEvent(claim: { taskId: string; workerId: string }) {
  return auditAppendTemplate({
    type: 'task.started',
    taskId: claim.taskId,
    ...ABOUT_FILLED,
    actor: { subject: claim.workerId, kind: 'worker' },
    data: { worker: claim.workerId, epoch: filledBySql('epoch'), attempt: filledBySql('attempt') },
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

// One statement, its own transaction: the lease, the journal read with it, and the claim's
// audit event appended last (the chain lock is held from there to the statement's commit).
const TAKE_LEASE = prepared(
  `WITH claimed AS (
     UPDATE app.tasks SET lease_owner = $2, lease_epoch = lease_epoch + 1,
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
                   FROM app.task_steps s WHERE s.task_id = $1) AS journal),
   appended AS (
     SELECT ${appendEventSql(
       `CASE WHEN c.first_start THEN $5 ELSE 'task.lease_taken' END`,
       filledAuditBody(
         '$6',
         '$7',
         `${aboutFilledValues('c')} || jsonb_build_object('epoch', c.lease_epoch, 'attempt', c.attempts)`,
       ),
     )}
       FROM claimed c)
   SELECT claimed.*, d.key_id AS d_key_id, d.iv AS d_iv, d.ciphertext AS d_ciphertext,
          d.tag AS d_tag,
          (extract(epoch FROM d.expires_at - now()) * 1000)::float8 AS d_remaining_ms
     FROM claimed CROSS JOIN appended
          LEFT JOIN app.task_credentials d ON d.task_id = claimed.id`,
);

/**
 * Takes the task's lease: only when nobody holds a live one and, given `served` (tool name →
 * the schema fingerprint this worker runs), only for a tool this worker runs at the task's
 * schema. Bumping the epoch fences off the previous holder, whose later journal, result and
 * status writes then match nothing. The claim reads the task's journal and its sealed
 * delegation in the same statement, and the claim and its `task.started` /
 * `task.lease_taken` event commit together: a worker killed in between leaves neither, so
 * every lease a task ever had is in the trail.
 */
export async function claimTask(
  db: Pool,
  claim: {
    taskId: string;
    workerId: string;
    leaseMs: number;
    served?: ReadonlyMap<string, string>;
  },
): Promise<ClaimOutcome> {
  const served = claim.served ? servedJson(claim.served) : null;
  const r = await runPrepared<
    TaskRow &
      BoundaryRow &
      DelegationColumns & { first_start: boolean; journal: Record<string, { value: unknown }> }
  >(db, TAKE_LEASE, [claim.taskId, claim.workerId, claim.leaseMs, served, ...claimEvent(claim)]);
  const row = r.rows[0];
  if (row) {
    const { journal, first_start, b_cancel, b_by, b_late, b_revoked, ...rest } = row;
    const { d_key_id, d_iv, d_ciphertext, d_tag, d_remaining_ms, ...task } = rest;
    return {
      kind: 'claimed',
      lease: { owner: claim.workerId, epoch: row.lease_epoch },
      task: task,
      boundary: boundaryOf({ b_cancel, b_by, b_late, b_revoked }),
      firstStart: first_start,
      journal: new Map(Object.entries(journal).map(([step, output]) => [step, output.value])),
      delegation:
        d_key_id !== null
          ? {
              sealed: { keyId: d_key_id, iv: d_iv, ciphertext: d_ciphertext, tag: d_tag },
              remainingMs: d_remaining_ms,
            }
          : null,
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
