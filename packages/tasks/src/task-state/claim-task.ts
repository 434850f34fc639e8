import type { Pool } from 'pg';
import { appendEventSql, auditAppendTemplate, filledAuditBody, filledBySql } from '@mtg/audit';
import { prepared, runPrepared, type PreparedStatement, type Queryable } from '@mtg/db';
import { jobTracesContinue, outsideSpans } from '@mtg/telemetry';
import type { SealedCredential } from '@mtg/identity';
import type { JobFetch } from '../job-queue.ts';
import { TASK_SELECT, type TaskRow } from '../task-row.ts';
import { ABOUT_FILLED, aboutFilledValues } from './about-task.ts';
import { ACTIVE, NOT_ENDED } from './predicates.ts';
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
 * attempt) and which task it took and who it is about (the claimed row's id, owner and tool);
 * its type is `task.started` on a first claim, `task.lease_taken` after (the statement
 * decides). With `traceId` filled in too: for a claim made with the job's fetch, before the
 * run's span exists, the trace id is the job's (claimNextJob).
 */
function claimEvent(workerId: string, o: { traceId?: boolean } = {}) {
  return auditAppendTemplate({
    type: 'task.started',
    taskId: filledBySql('taskId'),
    ...ABOUT_FILLED,
    ...(o.traceId ? { traceId: filledBySql('traceId') } : {}),
    actor: { subject: workerId, kind: 'worker' },
    data: { worker: workerId, epoch: filledBySql('epoch'), attempt: filledBySql('attempt') },
  });
}

/** claimNextJob's two events of one worker (with and without a trace id), built once. */
type ClaimEvent = ReturnType<typeof claimEvent>;
const fetchClaimEvents = new Map<string, ClaimEvent[]>();
function fetchClaimEvent(workerId: string, traced: boolean) {
  let events = fetchClaimEvents.get(workerId);
  if (!events) {
    // Outside any span: the trace id, if any, is the job's, filled in by the statement.
    events = outsideSpans(() => [claimEvent(workerId), claimEvent(workerId, { traceId: true })]);
    fetchClaimEvents.set(workerId, events);
  }
  const [untraced, withTrace] = events as [ClaimEvent, ClaimEvent];
  // $5 the type, $6 and $7 the event without a trace id, $8 and $9 with one.
  return traced ? [...untraced, withTrace[1], withTrace[2]] : untraced;
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

/**
 * The claim's CTEs `claimed`, `appended` and `taken` (what the claim returns): the lease of
 * task `taskId` (an SQL expression),
 * the journal read with it, and the claim's audit event appended last (the chain lock is held
 * from there to the statement's commit). Parameters: $2 the worker, $3 the lease in ms, $4 the
 * served tools (or null), $5–$7 the event (claimEvent).
 */
const claimCtes = (taskId: string, body = claimBody('$6', '$7')) => `claimed AS (
     UPDATE app.tasks SET lease_owner = $2, lease_epoch = lease_epoch + 1,
            lease_expires_at = now() + $3 * interval '1 millisecond',
            attempts = attempts + 1, started_at = COALESCE(started_at, now()),
            status_message = CASE WHEN status_message = 'queued' THEN 'started' ELSE status_message END,
            updated_at = now()
      WHERE id = ${taskId} AND ${NOT_ENDED}
        AND (lease_owner IS NULL OR lease_expires_at < now())
        AND ($4::jsonb IS NULL OR ($4::jsonb ? tool AND
             (tool_fingerprint IS NULL OR tool_fingerprint = $4::jsonb ->> tool)))
      RETURNING ${TASK_SELECT}, ${BOUNDARY_COLUMNS}, attempts = 1 AS first_start,
                (SELECT COALESCE(jsonb_object_agg(s.step, s.output), '{}'::jsonb)
                   FROM app.task_steps s WHERE s.task_id = tasks.id) AS journal),
   appended AS (
     SELECT ${appendEventSql(`CASE WHEN c.first_start THEN $5 ELSE 'task.lease_taken' END`, body)}
       FROM claimed c),
   taken AS (
     SELECT claimed.*, d.key_id AS d_key_id, d.iv AS d_iv, d.ciphertext AS d_ciphertext,
            d.tag AS d_tag,
            (extract(epoch FROM d.expires_at - now()) * 1000)::float8 AS d_remaining_ms
       FROM claimed CROSS JOIN appended
            LEFT JOIN app.task_credentials d ON d.task_id = claimed.id)`;

/** The claim's event body from its template's parts and names, filled from claimed row `c`. */
const claimValues = (extra = '') =>
  `${aboutFilledValues('c')} || jsonb_build_object('taskId', c.id, 'epoch', c.lease_epoch, 'attempt', c.attempts${extra})`;
function claimBody(parts: string, names: string) {
  return filledAuditBody(parts, names, claimValues());
}

// One statement, its own transaction: the claim of task $1.
const TAKE_LEASE = prepared(`WITH ${claimCtes('$1')} SELECT taken.* FROM taken`);

type ClaimedRow = TaskRow &
  BoundaryRow &
  DelegationColumns & { first_start: boolean; journal: Record<string, { value: unknown }> };

/** The claim a `taken` row records. */
function claimedOf(row: ClaimedRow, workerId: string): ClaimOutcome & { kind: 'claimed' } {
  const { journal, first_start, b_cancel, b_by, b_late, b_revoked, ...rest } = row;
  const { d_key_id, d_iv, d_ciphertext, d_tag, d_remaining_ms, ...task } = rest;
  return {
    kind: 'claimed',
    lease: { owner: workerId, epoch: row.lease_epoch },
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
  const r = await runPrepared<ClaimedRow>(db, TAKE_LEASE, [
    claim.taskId,
    claim.workerId,
    claim.leaseMs,
    served,
    ...claimEvent(claim.workerId),
  ]);
  const row = r.rows[0];
  if (row) return claimedOf(row, claim.workerId);
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

/** A job as pg-boss's fetch returns it (JOB_COLUMNS_MIN), with its data. */
export interface ClaimedJob<D = unknown> {
  id: string;
  name: string;
  data: D;
  retryCount: number;
  expireInSeconds: number;
  heartbeatSeconds: number | null;
  groupId: string | null;
  groupTier: string | null;
}

// The trace id of the fetched job's `traceparent` (W3C trace context, as the gateway stored
// it with the job), or null when it has none or it is malformed.
const JOB_TRACE_ID = `(SELECT CASE
      WHEN f.data ->> 'traceparent' ~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
       AND split_part(f.data ->> 'traceparent', '-', 2) <> repeat('0', 32)
       AND split_part(f.data ->> 'traceparent', '-', 3) <> repeat('0', 16)
      THEN split_part(f.data ->> 'traceparent', '-', 2) END
    FROM fetched f)`;

/**
 * The statement of claimNextJob for one pg-boss fetch (one per queue): traced, the claim's
 * event carries the job's trace id when the job has one ($8, $9: that event's template),
 * as it would be written inside the run's span.
 */
const claimNextJobStatements = new WeakMap<JobFetch, Map<boolean, PreparedStatement>>();
function claimNextJobStatement(fetch: JobFetch, traced: boolean) {
  let byTrace = claimNextJobStatements.get(fetch);
  if (!byTrace) {
    byTrace = new Map<boolean, PreparedStatement>();
    claimNextJobStatements.set(fetch, byTrace);
  }
  let statement = byTrace.get(traced);
  if (!statement) {
    const own = traced ? 9 : 7;
    const shift = (sql: string) => sql.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + own}`);
    const body = traced
      ? `CASE WHEN ${JOB_TRACE_ID} IS NULL THEN ${claimBody('$6', '$7')}
              ELSE ${filledAuditBody('$8', '$9', claimValues(`, 'traceId', ${JOB_TRACE_ID}`))} END`
      : claimBody('$6', '$7');
    statement = prepared(
      `WITH ${shift(fetch.ctes)},
   fetched AS (${shift(fetch.update)}),
   ${claimCtes(`(SELECT (f.data ->> 'taskId') FROM fetched f WHERE f.name = $1::text)`, body)}
   SELECT to_jsonb(f) - '__traceContext' AS job, taken.*
     FROM fetched f LEFT JOIN taken ON true`,
    );
    byTrace.set(traced, statement);
  }
  return statement;
}

/**
 * pg-boss's fetch of the next job of `queue` and the claim of that job's task, in one
 * statement: a worker woken for a task needs no round trip, and no commit, between the two.
 * The job is locked first (pg-boss's SKIP LOCKED: no other fetch waits for it), then the task's
 * row, then the tenant's chain. Nothing that holds a task's row waits for a job that is not
 * yet active (a completion completes its own, active job), so the order closes no cycle with
 * a claim, a cancel or an ending. Undefined: no job was waiting. A job with
 * no claim: its task could not be claimed here (held, ended, or not this worker's tool); the
 * caller runs it as any fetched job, and its claim says why.
 */
export async function claimNextJob<D = unknown>(
  db: Pool,
  c: {
    queue: string;
    fetch: JobFetch;
    workerId: string;
    leaseMs: number;
    served?: ReadonlyMap<string, string>;
  },
): Promise<
  { job: ClaimedJob<D>; claim: (ClaimOutcome & { kind: 'claimed' }) | undefined } | undefined
> {
  const served = c.served ? servedJson(c.served) : null;
  const traced = jobTracesContinue();
  const r = await runPrepared<ClaimedRow & { job: ClaimedJob<D> }>(
    db,
    claimNextJobStatement(c.fetch, traced),
    [
      c.queue,
      c.workerId,
      c.leaseMs,
      served,
      ...fetchClaimEvent(c.workerId, traced),
      ...c.fetch.values,
    ],
  );
  const row = r.rows[0];
  if (!row) return undefined;
  const { job, ...taken } = row;
  return { job, claim: taken.id === null ? undefined : claimedOf(taken, c.workerId) };
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
