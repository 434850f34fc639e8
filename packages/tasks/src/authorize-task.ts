import type { Pool } from 'pg';
import type { Principal } from '@mtg/identity';
import type { Workload } from '@mtg/policy';
import type { DenialFold } from './fold-denials.ts';
import { NOT_FOUND, taskError, type TaskError } from './errors.ts';
import { TASK_ID } from './task-id.ts';
import { prepared, runPrepared, type Queryable, type ReadRouter } from '@mtg/db';
import { VERB_COLUMNS, VERB_SELECT, type VerbTaskRow } from './task-row.ts';
import { OWNER_MATCH, RETAINED, WORKER_LOST } from './task-state/predicates.ts';

// `worker_lost` is decided by the database's clock, like every lease (docs/architecture.md).
const OWNED_TASK = prepared(
  `SELECT ${VERB_SELECT}, COALESCE(${WORKER_LOST}, false) AS worker_lost
     FROM app.tasks WHERE id = $1 AND ${OWNER_MATCH} AND ${RETAINED}`,
);
/**
 * The caller's retained task with whether its worker was lost and whether the caller's read
 * of its current status is audited already (audit-status-read.ts), over the parameters
 * numbered: the task id, the tenant (the subject is the next one) and the client. Read on
 * the primary only: the marks are UNLOGGED, which a hot standby cannot read.
 */
export const ownedTaskWithMark = (n: { id: number; tenant: number; client: number }) =>
  `SELECT ${VERB_SELECT}, COALESCE(${WORKER_LOST}, false) AS worker_lost,
          EXISTS (SELECT 1 FROM app.status_read_marks m
                   WHERE m.task_id = t.id AND m.tenant = $${n.tenant} AND m.subject = $${n.tenant + 1}
                     AND m.client = $${n.client} AND m.status_version = t.status_version)
            AS status_read_marked
     FROM app.tasks t
    WHERE id = $${n.id} AND tenant = $${n.tenant} AND subject = $${n.tenant + 1}
      AND client = $${n.client} AND ${RETAINED}`;
// A poll that repeats a status then makes no second round trip (auditStatusRead).
const OWNED_TASK_WITH_MARK = prepared(ownedTaskWithMark({ id: 1, tenant: 2, client: 4 }));

/**
 * A task row as a verb loads it: with whether its worker was lost (WORKER_LOST), and
 * whether the caller's read of its current status is audited already (a row from a write
 * has neither: not lost, not known to be marked).
 */
export type OwnedTaskRow = VerbTaskRow & { worker_lost?: boolean; status_read_marked?: boolean };

/**
 * A task row the request read already, on the primary, in the same round trip as its
 * revocation check and poll count (the gateway's poll path): the read verbs (`get`,
 * `result`) of that task by that caller take it instead of reading again, once per request.
 * Answers undefined when there is none for this task and caller.
 */
export type PrefetchedTask = (taskId: string, p: Principal) => OwnedTaskRow | undefined;

/** The task of a row that selected ownedTaskWithMark's columns beside others; undefined if none. */
export function ownedTaskOf(row: Record<string, unknown>): OwnedTaskRow | undefined {
  if (row.id === null || row.id === undefined) return undefined;
  const task: Record<string, unknown> = {};
  for (const c of VERB_COLUMNS) task[c] = row[c];
  task.worker_lost = row.worker_lost;
  task.status_read_marked = row.status_read_marked;
  return task as unknown as OwnedTaskRow;
}

/** The verbs that may take a prefetched row: reads, never a verb that writes (cancel, answer). */
const PREFETCH_VERBS = new Set(['get', 'result']);

export interface VerbContext {
  principal: Principal;
  correlationId: string;
  wire: string;
  /** The caller's live token, when a verb may need to exchange it (checkpoint resume). */
  token?: string;
  /** The calling workload (the gateway's workload identity); the per-tool policy decides on it. */
  workload?: Workload;
  /**
   * The deployment's per-tool policy for this caller (POLICY_FILE; set by the gateway's
   * policy gate): false for a tool the calling workload may not use, whose tasks it then
   * may not read or cancel either.
   */
  admitTool?: (tool: string) => boolean;
}

/**
 * Loads a task for a verb if, and only if, the caller owns it (same tenant, subject and
 * client), it is retained, the per-tool policy (if any) admits the tool for the calling
 * workload, and the caller's token still holds the tool's scope. Every other
 * case answers NOT_FOUND — a foreign task and a missing one are indistinguishable to the
 * caller — while the audit event records the precise reason; except the owner's missing
 * scope, which is told (`insufficient_scope`; the gateway's HTTP layer has usually already
 * answered it with the step-up challenge, step-up-scope.ts).
 */
export async function authorizeTask(
  deps: DenyDeps,
  taskId: string,
  verb: string,
  ctx: VerbContext,
  scopeOf: (tool: string) => string | undefined,
  /**
   * Given, the task row may come from the read replica (a read verb); without it, from the
   * primary (a verb that writes or must be exact: cancel).
   */
  reads?: ReadRouter,
): Promise<{ ok: true; task: OwnedTaskRow } | TaskError> {
  const { pool } = deps;
  const p = ctx.principal;
  const prefetched = PREFETCH_VERBS.has(verb) ? deps.prefetched?.(taskId, p) : undefined;
  const row =
    prefetched ?? (TASK_ID.test(taskId) ? await ownedTask(deps, taskId, p, reads) : undefined);
  if (!row) {
    await denyNotFound(deps, ctx, verb, taskId, await whyNotFound(pool, taskId, p));
    return NOT_FOUND;
  }
  if (ctx.admitTool && !ctx.admitTool(row.tool)) {
    // Answered like a missing task: the policy does not let this workload near the tool.
    await deny(deps, ctx, verb, taskId, 'policy_denied', row.tool);
    return NOT_FOUND;
  }
  const scope = scopeOf(row.tool);
  if (scope && !p.scopes.includes(scope)) {
    await deny(deps, ctx, verb, taskId, 'scope_missing', row.tool);
    return taskError(
      'insufficient_scope',
      `Your token lacks scope ${scope}, needed for tasks of ${row.tool}`,
      { scope },
    );
  }
  return { ok: true, task: row };
}

/** The caller's retained task with this id, or undefined. */
async function ownedTask(
  deps: DenyDeps,
  taskId: string,
  p: Principal,
  reads: ReadRouter | undefined,
): Promise<OwnedTaskRow | undefined> {
  const values = [taskId, p.tenant, p.subject, p.client];
  if (!reads)
    return (await runPrepared<OwnedTaskRow>(deps.pool, OWNED_TASK_WITH_MARK, values)).rows[0];
  const select = (db: Queryable) => runPrepared<OwnedTaskRow>(db, OWNED_TASK, values);
  const first = await reads.read(readKeys(p, taskId), select);
  if (first.value.rows[0] || first.target === 'primary') return first.value.rows[0];
  // Not on the replica: perhaps created a moment ago (through another gateway replica, whose
  // caller's next poll came here). Only the primary may say a task does not exist.
  return (await reads.onPrimary('not_found', select)).rows[0];
}

/** The read-your-writes keys of a caller (and of one of its tasks): see docs/scaling.md. */
export function readKeys(p: Principal, taskId?: string): string[] {
  const caller = `caller:${p.tenant}\u0000${p.subject}\u0000${p.client}`;
  return taskId ? [caller, taskReadKey(taskId)] : [caller];
}

/** The read-your-writes key of one task, whoever wrote it. */
export const taskReadKey = (taskId: string) => `task:${taskId}`;

/** For the audit record only; never shown to the caller. */
async function whyNotFound(pool: Pool, taskId: string, p: Principal): Promise<string> {
  if (!TASK_ID.test(taskId)) return 'malformed_task_id';
  const r = await pool.query<{ tenant: string; subject: string; client: string; gone: boolean }>(
    `SELECT tenant, subject, client, NOT ${RETAINED} AS gone FROM app.tasks WHERE id = $1`,
    [taskId],
  );
  const t = r.rows[0];
  if (!t) return 'unknown_task';
  if (t.tenant !== p.tenant) return 'cross_tenant';
  if (t.subject !== p.subject) return 'other_subject';
  if (t.client !== p.client) return 'other_client';
  return t.gone ? 'retention_passed' : 'unknown_task';
}

/**
 * Audits a verb on a task the caller cannot see. The caller's tenant reads its own chain (its
 * auditors, its evidence bundles, whose events are hashed as written): that an id it probed
 * is another tenant's task would tell it the id exists, so its event says `unknown_task`, as
 * for an id that does not exist. The operator of the whole system keeps the distinction: a
 * second event, in chain 0 (no tenant, so no tenant's view or bundle selects it), records
 * `cross_tenant` with the caller (`data.callerTenant`) and the task id.
 */
export async function denyNotFound(
  deps: DenyDeps,
  ctx: VerbContext,
  verb: string,
  taskId: string,
  reason: string,
): Promise<void> {
  if (reason !== 'cross_tenant') return deny(deps, ctx, verb, taskId, reason);
  await deny(deps, ctx, verb, taskId, 'unknown_task');
  await deps.denials.deny({
    type: 'task.denied',
    taskId,
    subject: ctx.principal.subject,
    client: ctx.principal.client,
    reason: 'cross_tenant',
    correlationId: ctx.correlationId,
    data: { verb, wire: ctx.wire, callerTenant: ctx.principal.tenant },
  });
}

/** What authorizing and denying need: the pool, and the fold for repeated denials. */
export interface DenyDeps {
  pool: Pool;
  denials: DenialFold;
  /** The request's task row read beside its revocation check (authorizeTask's reads take it). */
  prefetched?: PrefetchedTask;
}

/** Audits a denied verb; one caller's repeats of it fold into a summary (fold-denials.ts). */
export async function deny(
  deps: DenyDeps,
  ctx: VerbContext,
  verb: string,
  taskId: string | undefined,
  reason: string,
  tool?: string,
): Promise<void> {
  await deps.denials.deny({
    type: 'task.denied',
    ...(taskId && TASK_ID.test(taskId) ? { taskId } : {}),
    tenant: ctx.principal.tenant,
    subject: ctx.principal.subject,
    client: ctx.principal.client,
    ...(tool ? { tool } : {}),
    reason,
    correlationId: ctx.correlationId,
    data: { verb, wire: ctx.wire },
  });
}
