import type { Pool, PoolClient } from 'pg';
import {
  appendAuditInTransaction,
  auditAppendArgs,
  auditAppendTemplate,
  filledAuditBody,
  filledBySql,
  type AuditEvent,
} from '@mtg/audit';
import { prepared, runPrepared, withTransaction, type PreparedStatement } from '@mtg/db';
import type { JobCompletion } from '../job-queue.ts';
import type { TaskRow } from '../task-row.ts';
import { LIVE_LEASE, fenced } from './predicates.ts';
import { ABOUT_FILLED, aboutFilledValues, aboutTask } from './about-task.ts';
import type { Lease } from './lease.ts';
import {
  settledCte,
  settleParams,
  settleTask,
  type OnTaskEnded,
  type Settlement,
} from './settle-task.ts';

/** What an ending needs: the pool it opens its transaction on, and the hook it fires. */
export interface EndDeps {
  pool: Pool;
  /** Fired once the ending committed (by the process that ended the task). */
  onTaskEnded?: OnTaskEnded;
}

const durationMs = (row: TaskRow) => row.ended_at!.getTime() - row.created_at.getTime();
/** `durationMs` in SQL, of the app.tasks row `alias` (a Date keeps whole milliseconds). */
const durationSql = (alias: string) =>
  `(floor(extract(epoch FROM ${alias}.ended_at) * 1000) - ` +
  `floor(extract(epoch FROM ${alias}.created_at) * 1000))::bigint`;

/**
 * How a task ends (but for a completion, which does the same in one statement): settle,
 * then its audit event, in one transaction; then, after commit, the hook. `before` runs
 * first in the same transaction (a check that no live worker holds the task); when it
 * returns false nothing ends.
 */
async function endTask(
  deps: EndDeps,
  settlement: Settlement,
  event: (row: TaskRow) => AuditEvent,
  before?: (c: PoolClient) => Promise<boolean>,
): Promise<TaskRow | undefined> {
  const ended = await withTransaction(deps.pool, async (c) => {
    if (before && !(await before(c))) return undefined;
    const row = await settleTask(c, settlement);
    if (!row) return undefined;
    await appendAuditInTransaction(c, event(row));
    return row;
  });
  if (ended) deps.onTaskEnded?.(ended);
  return ended;
}

// One statement, its own transaction: the settlement (SETTLED), the result, stored only when
// the task settled under the writer's lease (a stale worker's result is never stored), and
// `task.completed`, appended last, once the result and the delegation's end are written (the
// chain lock is held from there to the statement's commit). With the run's job (`job`), the
// job is completed too, only when the task settled, and before the append (a data-modifying
// CTE no one reads runs after the rest, which would hold the tenant's chain lock through it):
// pg-boss's own UPDATE, its parameters after the statement's own. With the run's last step
// (`withStep`, a step the run had not journaled yet: CompletedStep), its journal row under
// the same lease and its `task.step_completed` event, appended before `task.completed`, only
// when the task settled and the step was not journaled already: $19–$22 the step's name,
// seq, output and start, $23 / $24 its event's type and body.
const completeText = (job: string | undefined, withStep: boolean, atBoundary: boolean) => {
  const own = withStep ? COMPLETE_PARAMS + STEP_PARAMS : COMPLETE_PARAMS;
  const events = withStep
    ? `(CASE WHEN j.n > 0 THEN ARRAY[$23::text] ELSE '{}'::text[] END) || `
    : '';
  const bodies = withStep
    ? `(CASE WHEN j.n > 0 THEN ARRAY[$24::text] ELSE '{}'::text[] END) || `
    : '';
  const completed = filledAuditBody(
    '$17',
    '$18',
    `${aboutFilledValues('s')} || jsonb_build_object('durationMs', ${durationSql('s')}, 'attempts', s.attempts)`,
  );
  return `WITH ${settledCte(atBoundary)},
   stored AS (
     INSERT INTO app.task_results (task_id, result, is_error, size_bytes, expires_at, delete_on_read)
     SELECT id, $12, $13, $14, now() + ttl_ms * interval '1 millisecond', $15 FROM settled
     RETURNING task_id),${
       withStep
         ? `
   journaled AS (
     INSERT INTO app.task_steps (task_id, step, seq, output, lease_epoch, worker, started_at)
     SELECT id, $19, $20, $21, $8, $7, $22 FROM settled
     ON CONFLICT (task_id, step) DO NOTHING RETURNING task_id),`
         : ''
     }${
       job === undefined
         ? ''
         : `
   job_done AS (
     ${job.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + own}`)}
       AND EXISTS (SELECT 1 FROM settled)
     RETURNING id),`
     }
   appended AS (
     SELECT audit.append_many(${events}ARRAY[$16::text], ${bodies}ARRAY[(${completed})::text],
                              NULL::uuid[], false)
       FROM settled s
            CROSS JOIN (SELECT count(*) FROM stored) r
            CROSS JOIN (SELECT count(*) FROM ended_delegation) d${
              withStep ? '\n            CROSS JOIN (SELECT count(*) AS n FROM journaled) j' : ''
            }${job === undefined ? '' : '\n            CROSS JOIN (SELECT count(*) FROM job_done) jd'})
   SELECT settled.* FROM settled CROSS JOIN notified CROSS JOIN appended`;
};
const COMPLETE_PARAMS = 18;
const STEP_PARAMS = 6;
/** The completion's statements: with or without a last step, and a job's completion (one per pg-boss text). */
const completions = new Map<string, PreparedStatement>();
function completion(
  jobText: string | undefined,
  withStep: boolean,
  atBoundary: boolean,
): PreparedStatement {
  const key = `${withStep ? 's' : '-'}${atBoundary ? 'b' : '-'}${jobText ?? ''}`;
  let statement = completions.get(key);
  if (!statement) {
    statement = prepared(completeText(jobText, withStep, atBoundary));
    completions.set(key, statement);
  }
  return statement;
}

/**
 * A step the run finished but has not journaled yet, which the completion journals with its
 * `task.step_completed` event (the run's last step: journalStep otherwise).
 */
export interface CompletedStep {
  name: string;
  seq: number;
  output: unknown;
  startedAt: Date;
  event: AuditEvent;
}

/** A tool result as the worker stores it. */
export interface FinishedResult {
  result: { content: unknown[]; structuredContent?: Record<string, unknown>; isError?: boolean };
  text: string;
  sizeBytes: number;
  deleteOnRead: boolean;
}

/**
 * working → completed, by the lease holder: the settlement, the result row and
 * `task.completed` (after the run's last step, when it carries one) in one fenced statement
 * (completeText); then, once it committed, the hook. Undefined when nothing settled: the lease
 * is lost (or, `atBoundary`, a stop stands).
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
    /** The tool's last progress report, if no statement wrote it yet (Settlement.progress). */
    progress?: Settlement['progress'];
    /** The run's job, completed in the same statement when the task settles (jobCompletion). */
    job?: JobCompletion;
    /** The run's last step, not journaled yet: journaled in the same statement (CompletedStep). */
    step?: CompletedStep;
    /**
     * The run's end, in place of its boundary read: the task settles only if no cancel,
     * deadline or revocation stands either (settledCte); otherwise nothing is written, as when
     * the lease is lost, and the run reads its boundary to tell which.
     */
    atBoundary?: boolean;
  },
): Promise<TaskRow | undefined> {
  const isError = c.finished.result.isError === true;
  const settlement: Settlement = {
    taskId: c.taskId,
    status: 'completed',
    outcome: isError ? 'tool_error' : 'completed',
    message: isError ? 'Completed with a tool error' : 'Completed',
    endedBy: { path: 'worker', worker: c.workerId },
    lease: c.lease,
    ...(c.progress ? { progress: c.progress } : {}),
  };
  const event = auditAppendTemplate({
    type: 'task.completed',
    taskId: c.taskId,
    ...ABOUT_FILLED,
    reason: isError ? 'tool_error' : 'success',
    data: {
      outcome: isError ? 'tool_error' : 'success',
      durationMs: filledBySql('durationMs'),
      runMs: c.runMs,
      resultBytes: c.finished.sizeBytes,
      downstreamSystems: c.downstreamSystems,
      attempts: filledBySql('attempts'),
    },
  });
  const values = [
    ...settleParams(settlement),
    c.finished.text,
    isError,
    c.finished.sizeBytes,
    c.finished.deleteOnRead,
    ...event,
  ];
  if (c.step)
    values.push(
      c.step.name,
      c.step.seq,
      JSON.stringify({ value: c.step.output }),
      c.step.startedAt,
      ...auditAppendArgs(c.step.event),
    );
  if (c.job) values.push(...c.job.values);
  const statement = completion(c.job?.text, c.step !== undefined, c.atBoundary === true);
  const r = await runPrepared<TaskRow>(deps.pool, statement, values);
  const ended = r.rows[0];
  if (ended) deps.onTaskEnded?.(ended);
  return ended;
}

/** working → failed, by the lease holder (its error, its deadline, its delegation, its result). */
export async function failTask(
  deps: EndDeps,
  f: {
    taskId: string;
    lease: Lease;
    workerId: string;
    outcome: string;
    message: string;
    progress?: Settlement['progress'];
  },
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
      ...(f.progress ? { progress: f.progress } : {}),
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
