import { appendAuditGrouped } from '@mtg/audit';
import { databaseFailureOf, type Pool } from '@mtg/db';
import type { Logger } from '@mtg/log';
import type { Policy } from '@mtg/policy';
import {
  taskError,
  type StartInput,
  type TaskError,
  type TaskErrorCode,
  type TaskService,
  type VerbContext,
} from '@mtg/tasks';
import { UNAVAILABLE_RETRY_SECONDS } from '../http/json-rpc-error.ts';
import type { LimitName, RateDecision, RateLimits } from '../http/rate-limit.ts';
import { resultWaitCap } from './result-wait-cap.ts';
import { policyPermits, type ToolPolicy } from './tool-policy.ts';

/**
 * Glossary
 * - verb: an async method of TaskService (TASK_VERBS); `toolScope` is a lookup, not a verb.
 * - guard: what the gateway puts in front of every verb (TaskGuard): it sees each call,
 *   may answer it itself (a refusal) or pass it on, changed or not, to the next guard.
 * - the list: taskServiceGuards(), outermost first; guardTaskService() applies it to every
 *   verb by construction, so a verb added to TaskService cannot skip a guard (a verb missing
 *   from TASK_VERBS does not compile, and apps/gateway/test/task-service-guards.test.ts
 *   enumerates the service's verbs and sends each through each guard).
 */
export type TaskVerb = Exclude<keyof TaskService, 'toolScope'>;

export const TASK_VERBS = [
  'start',
  'get',
  'read',
  'result',
  'awaitResult',
  'cancel',
  'answer',
  'approvals',
  'decide',
  'list',
] as const satisfies readonly TaskVerb[];
type Unlisted = Exclude<TaskVerb, (typeof TASK_VERBS)[number]>;
export const everyVerbListed: [Unlisted] extends [never] ? true : Unlisted = true;

/** One call of a verb, as a guard sees it: the verb, its arguments, and accessors on them. */
export interface VerbCall {
  verb: TaskVerb;
  args: unknown[];
}

/** What a verb answers: `{ ok: true, … }` or a TaskError. */
export type VerbOutcome = { ok: true; [key: string]: unknown } | TaskError;
type Outcome = VerbOutcome;
type Next = (call: VerbCall) => Promise<Outcome>;

export interface TaskGuard {
  name: string;
  around(call: VerbCall, next: Next): Promise<Outcome>;
}

/**
 * Where each verb carries its caller (a VerbContext, or a StartInput for start) and its task
 * id. A Record over every verb: a new verb does not compile until it says.
 */
const SHAPE: Record<TaskVerb, { ctx: number; taskId?: number; audited: string }> = {
  start: { ctx: 0, audited: 'start' },
  get: { ctx: 1, taskId: 0, audited: 'get' },
  // A status read with its result is one read: limited once, audited as get (or as the
  // result read it names itself: `options.verb`, the job tools' get_job_result).
  read: { ctx: 1, taskId: 0, audited: 'get' },
  result: { ctx: 1, taskId: 0, audited: 'result' },
  awaitResult: { ctx: 1, taskId: 0, audited: 'result' },
  cancel: { ctx: 1, taskId: 0, audited: 'cancel' },
  answer: { ctx: 1, taskId: 0, audited: 'answer' },
  approvals: { ctx: 0, audited: 'approvals' },
  decide: { ctx: 1, taskId: 0, audited: 'decide' },
  list: { ctx: 0, audited: 'list' },
};

/** The caller of a call (for start, its StartInput, which names the same principal). */
export const callerOf = (call: VerbCall) =>
  call.args[SHAPE[call.verb].ctx] as VerbContext | StartInput;
/** The verb a denial of this call is audited under. */
const auditedVerb = (call: VerbCall): string =>
  call.verb === 'read'
    ? ((call.args[2] as { verb?: string } | undefined)?.verb ?? SHAPE.read.audited)
    : SHAPE[call.verb].audited;
const taskIdOf = (call: VerbCall) => {
  const i = SHAPE[call.verb].taskId;
  return i === undefined ? undefined : (call.args[i] as string);
};
const withCaller = (call: VerbCall, ctx: VerbContext): VerbCall => {
  const args = [...call.args];
  args[SHAPE[call.verb].ctx] = ctx;
  return { ...call, args };
};

/**
 * `tasks` with `guards` (outermost first) in front of every verb in TASK_VERBS. The result
 * is built from the list of verbs, never by spreading `tasks`.
 */
export function guardTaskService(tasks: TaskService, guards: readonly TaskGuard[]): TaskService {
  const inner: Next = (call) =>
    (tasks[call.verb] as (...a: unknown[]) => Promise<Outcome>)(...call.args);
  const chain = guards.reduceRight<Next>(
    (next, guard) => (call) => guard.around(call, next),
    inner,
  );
  const guarded = { toolScope: (tool: string) => tasks.toolScope(tool) } as Record<string, unknown>;
  for (const verb of TASK_VERBS) guarded[verb] = (...args: unknown[]) => chain({ verb, args });
  return guarded as unknown as TaskService;
}

/** What the gateway's guards need. */
export interface TaskGuardDeps {
  pool: Pool;
  logger: Logger;
  rateLimits: RateLimits;
  countDenial: (reason: string) => void;
  maxResultWaitsPerCaller: number;
  /** The deployment's tool policy (POLICY_FILE), the same object dispatch asks. */
  toolPolicy?: Pick<ToolPolicy, 'permits'>;
}

/**
 * THE list, outermost first: the per-tool policy (when POLICY_FILE is set), denial counts, the
 * database outage answer, the rate limits, and the cap on held blocking results. Every wire
 * and the job tools reach the service through it.
 */
export function taskServiceGuards(deps: TaskGuardDeps): TaskGuard[] {
  return [
    ...(deps.toolPolicy ? [toolPolicyGuard(deps.toolPolicy)] : []),
    denialCountGuard(deps.countDenial),
    databaseOutageGuard(deps.logger),
    rateLimitGuard(deps.rateLimits, deps.pool),
    resultWaitCap({ maxPerCaller: deps.maxResultWaitsPerCaller, pool: deps.pool }),
  ];
}

const LIMIT_TEXT: Record<LimitName, string> = {
  starts: 'task starts per user per minute',
  client_starts: 'task starts per client per minute',
  tenant_starts: 'task starts per tenant per minute',
  polls: 'status and result reads per second',
  controls: 'task cancels and lists per second',
};

/** Which bucket each verb spends: starts, reads (polls), or cancels and lists (controls). */
const BUCKET: Record<TaskVerb, 'start' | 'poll' | 'control'> = {
  start: 'start',
  get: 'poll',
  read: 'poll',
  result: 'poll',
  awaitResult: 'poll',
  // Each refused cancel or list of a random id was an audit event of its own before.
  cancel: 'control',
  // An answer is a control like a cancel: a few per task, never a poll loop.
  answer: 'control',
  approvals: 'control',
  decide: 'control',
  list: 'control',
};

/**
 * Rate limits in front of the task service, so all three wires share them and answer in
 * their own shape (dispatch/job tools map the `rate_limited` TaskError: JSON-RPC -32000 with
 * `data.retryAfterSeconds` on task wires, an `isError` tool result for job tools). Starts
 * are limited per subject and per client; status and result reads per caller, and cancels
 * and lists per caller (a bucket of their own). Denials are audited as `task.denied` /
 * `rate_limited`, once per caller per window, so a flood cannot flood the audit chain.
 */
export function rateLimitGuard(limits: RateLimits, pool: Pool): TaskGuard {
  return {
    name: 'rate limits',
    async around(call, next) {
      const ctx = callerOf(call);
      const d = await limits[BUCKET[call.verb]](ctx.principal);
      return d.ok ? next(call) : refuse(d, ctx, auditedVerb(call), taskIdOf(call));
    },
  };

  async function refuse(
    d: Extract<RateDecision, { ok: false }>,
    ctx: VerbContext | StartInput,
    verb: string,
    taskId?: string,
  ): Promise<TaskError> {
    limits.noteDenied(d.retryAfterSeconds);
    if (d.firstInWindow) {
      await appendAuditGrouped(pool, {
        type: 'task.denied',
        ...(taskId && /^[0-9a-f]{32}$/.test(taskId) ? { taskId } : {}),
        tenant: ctx.principal.tenant,
        subject: ctx.principal.subject,
        client: ctx.principal.client,
        reason: 'rate_limited',
        correlationId: ctx.correlationId,
        data: {
          verb,
          wire: ctx.wire,
          limit: d.limit,
          retryAfterSeconds: d.retryAfterSeconds,
          auditedOncePerWindow: true,
        },
      });
    }
    return taskError(
      'rate_limited',
      `Rate limit exceeded (${LIMIT_TEXT[d.limit]}); retry after ${d.retryAfterSeconds}s`,
      { retryAfterSeconds: d.retryAfterSeconds },
    );
  }
}

/** Task-verb outcomes that are denials (audited as such by the service), not states. */
const DENIALS = new Set<TaskErrorCode>([
  'task_not_found',
  'insufficient_scope',
  'idempotency_conflict',
  'user_limit',
  'tenant_limit',
  'result_gone',
  'principal_revoked',
  'delegation_refused',
  'rate_limited',
  'result_wait_limit',
  'approval_refused',
]);

/** Counts every denied task verb by its reason code (for mtg_denials_total). */
export function denialCountGuard(count: (reason: string) => void): TaskGuard {
  return {
    name: 'denial counts',
    async around(call, next) {
      const outcome = await next(call);
      if (!outcome.ok && DENIALS.has(outcome.code)) count(outcome.code);
      // A status read whose inlined result is gone is that denial too.
      if (outcome.ok && outcome.result === 'gone') count('result_gone');
      return outcome;
    },
  };
}

/**
 * Which verbs the per-tool policy gates. Each verb that acts on one task is gated; start and
 * list say why not: a start is admitted by dispatch before its arguments are parsed
 * (tool-policy.ts, with its own `policy_denied` audit), and a list shows the caller's own
 * tasks' metadata only.
 */
const POLICY_GATED: Record<TaskVerb, boolean> = {
  start: false,
  get: true,
  read: true,
  result: true,
  awaitResult: true,
  cancel: true,
  answer: true,
  // The approver's own list, filtered by their scopes; a decision is gated on the task's tool.
  approvals: false,
  decide: true,
  list: false,
};

/**
 * The per-tool policy (POLICY_FILE) on the task verbs too: a workload the policy does not let
 * use a tool may not read, await or cancel that tool's tasks either, whoever started them.
 * authorizeTask asks `ctx.admitTool` once it has the task's row, audits `policy_denied`, and
 * answers exactly as for a missing task. No workload identity: nothing is admitted (as for
 * tools/call).
 */
export function toolPolicyGuard(policy: Pick<ToolPolicy, 'permits'>): TaskGuard {
  return {
    name: 'tool policy',
    around(call, next) {
      if (!POLICY_GATED[call.verb]) return next(call);
      const ctx = callerOf(call) as VerbContext;
      return next(
        withCaller(call, {
          ...ctx,
          admitTool: (tool: string) => policy.permits(ctx.principal, ctx.workload, tool),
        }),
      );
    },
  };
}

/**
 * PostgreSQL unreachable (restart, failover): every verb answers `unavailable` with a retry
 * hint — on task wires JSON-RPC -32000 with `data.retryAfterSeconds`, as for a rate limit —
 * instead of an internal error carrying the driver's message. Nothing was done: a start's
 * transaction never committed. Not audited (the audit trail is in the same database).
 * Any other PostgreSQL error is a bug, but the SDKs put a handler's error message on the
 * wire (-32603): its text (constraint names, input echoed back) goes to the log only.
 */
export function databaseOutageGuard(logger: Logger): TaskGuard {
  return {
    name: 'database outage',
    async around(call, next) {
      const verb = auditedVerb(call);
      try {
        return await next(call);
      } catch (error) {
        const failure = databaseFailureOf(error);
        if (failure?.code === 'database_unavailable') {
          logger.warn('task verb refused: database unavailable', {
            verb,
            error: (error as Error).message,
          });
          return taskError(
            'unavailable',
            `Temporarily unavailable: the task store cannot be reached; retry after ${UNAVAILABLE_RETRY_SECONDS}s`,
            { retryAfterSeconds: UNAVAILABLE_RETRY_SECONDS },
          );
        }
        if (failure?.code === 'database_statement_failed') {
          logger.error('task verb failed in the database', {
            verb,
            code: failure.sqlState,
            error: (error as Error).message,
          });
          // eslint-disable-next-line preserve-caught-error -- logged above; the caller gets no database detail
          throw new Error('Internal error');
        }
        throw error;
      }
    },
  };
}

// Each guard alone, in front of a service (for the guards' own tests).
export const withRateLimits = (tasks: TaskService, limits: RateLimits, pool: Pool) =>
  guardTaskService(tasks, [rateLimitGuard(limits, pool)]);
export const withDenialCounts = (tasks: TaskService, count: (reason: string) => void) =>
  guardTaskService(tasks, [denialCountGuard(count)]);
export const withToolPolicy = (tasks: TaskService, policy: Policy) =>
  guardTaskService(tasks, [toolPolicyGuard({ permits: policyPermits(policy) })]);
export const withDatabaseOutage = (tasks: TaskService, logger: Logger) =>
  guardTaskService(tasks, [databaseOutageGuard(logger)]);
