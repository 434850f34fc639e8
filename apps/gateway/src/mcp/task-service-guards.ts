import { appendAudit } from '@mtg/audit';
import { isDatabaseUnavailable, type Pool } from '@mtg/db';
import type { Logger } from '@mtg/log';
import {
  taskError,
  type TaskError,
  type TaskErrorCode,
  type TaskService,
  type VerbContext,
} from '@mtg/tasks';
import type { Policy, Workload } from '@mtg/policy';
import { UNAVAILABLE_RETRY_SECONDS } from '../http/json-rpc-error.ts';
import type { LimitName, RateDecision, RateLimits } from '../http/rate-limit.ts';

const LIMIT_TEXT: Record<LimitName, string> = {
  starts: 'task starts per user per minute',
  client_starts: 'task starts per client per minute',
  tenant_starts: 'task starts per tenant per minute',
  polls: 'status and result reads per second',
  controls: 'task cancels and lists per second',
};

/**
 * Rate limits in front of the task service, so all three wires share them and answer in
 * their own shape (dispatch/job tools map the `rate_limited` TaskError: JSON-RPC -32000 with
 * `data.retryAfterSeconds` on task wires, an `isError` tool result for job tools). Starts
 * are limited per subject and per client; status and result reads per caller, and cancels
 * and lists per caller (a bucket of their own). Denials are
 * audited as `task.denied` / `rate_limited`, once per caller per window, so a flood cannot
 * flood the audit chain.
 */
export function withRateLimits(tasks: TaskService, limits: RateLimits, pool: Pool): TaskService {
  const refuse = async (
    d: Extract<RateDecision, { ok: false }>,
    ctx: VerbContext,
    verb: string,
    taskId?: string,
  ): Promise<TaskError> => {
    limits.noteDenied(d.retryAfterSeconds);
    if (d.firstInWindow) {
      await appendAudit(pool, {
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
      {
        retryAfterSeconds: d.retryAfterSeconds,
      },
    );
  };
  return {
    ...tasks,
    async start(input) {
      const d = await limits.start(input.principal);
      return d.ok ? tasks.start(input) : refuse(d, input, 'start');
    },
    async get(taskId, ctx) {
      const d = await limits.poll(ctx.principal);
      return d.ok ? tasks.get(taskId, ctx) : refuse(d, ctx, 'get', taskId);
    },
    // A status read with its result is one read: one point, not one for each half.
    async read(taskId, ctx, options) {
      const d = await limits.poll(ctx.principal);
      return d.ok
        ? tasks.read(taskId, ctx, options)
        : refuse(d, ctx, options.verb ?? 'get', taskId);
    },
    async result(taskId, ctx) {
      const d = await limits.poll(ctx.principal);
      return d.ok ? tasks.result(taskId, ctx) : refuse(d, ctx, 'result', taskId);
    },
    async awaitResult(taskId, ctx, waitMs) {
      const d = await limits.poll(ctx.principal);
      return d.ok ? tasks.awaitResult(taskId, ctx, waitMs) : refuse(d, ctx, 'result', taskId);
    },
    // Each refused cancel or list of a random id was an audit event of its own before.
    async cancel(taskId, ctx, options) {
      const d = await limits.control(ctx.principal);
      return d.ok ? tasks.cancel(taskId, ctx, options) : refuse(d, ctx, 'cancel', taskId);
    },
    async list(ctx, page) {
      const d = await limits.control(ctx.principal);
      return d.ok ? tasks.list(ctx, page) : refuse(d, ctx, 'list');
    },
  };
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
]);

/** Counts every denied task verb by its reason code (for mtg_denials_total). */
export function withDenialCounts(tasks: TaskService, count: (reason: string) => void): TaskService {
  const counted = <T extends { ok: boolean }>(outcome: T): T => {
    const code = (outcome as { ok: boolean; code?: TaskErrorCode }).code;
    if (!outcome.ok && code && DENIALS.has(code)) count(code);
    return outcome;
  };
  return {
    ...tasks,
    start: async (input) => counted(await tasks.start(input)),
    get: async (taskId, ctx) => counted(await tasks.get(taskId, ctx)),
    read: async (taskId, ctx, options) => {
      const outcome = counted(await tasks.read(taskId, ctx, options));
      if (outcome.ok && outcome.result === 'gone') count('result_gone');
      return outcome;
    },
    result: async (taskId, ctx) => counted(await tasks.result(taskId, ctx)),
    awaitResult: async (taskId, ctx, waitMs) =>
      counted(await tasks.awaitResult(taskId, ctx, waitMs)),
    cancel: async (taskId, ctx, options) => counted(await tasks.cancel(taskId, ctx, options)),
    list: async (ctx, page) => counted(await tasks.list(ctx, page)),
  };
}

/**
 * The per-tool policy (POLICY_FILE) on the task verbs too: a workload the policy does not let
 * use a tool may not read, await or cancel that tool's tasks either, whoever started them.
 * authorizeTask asks `ctx.admitTool` once it has the task's row, audits `policy_denied`, and
 * answers exactly as for a missing task. No workload identity: nothing is admitted (as for
 * tools/call). tasks/list is not filtered: it shows the caller's own tasks' metadata.
 */
export function withToolPolicy(tasks: TaskService, policy: Policy): TaskService {
  const gated = <C extends VerbContext>(ctx: C): C => {
    const workload = (ctx as { workload?: Workload }).workload;
    return {
      ...ctx,
      admitTool: (tool: string) =>
        workload !== undefined && policy.decide(workload, tool, ctx.principal.scopes).allowed,
    };
  };
  return {
    ...tasks,
    get: (taskId, ctx) => tasks.get(taskId, gated(ctx)),
    read: (taskId, ctx, options) => tasks.read(taskId, gated(ctx), options),
    result: (taskId, ctx) => tasks.result(taskId, gated(ctx)),
    awaitResult: (taskId, ctx, waitMs) => tasks.awaitResult(taskId, gated(ctx), waitMs),
    cancel: (taskId, ctx, options) => tasks.cancel(taskId, gated(ctx), options),
  };
}

/**
 * PostgreSQL unreachable (restart, failover): every verb answers `unavailable` with a retry
 * hint — on task wires JSON-RPC -32000 with `data.retryAfterSeconds`, as for a rate limit —
 * instead of an internal error carrying the driver's message. Nothing was done: a start's
 * transaction never committed. Not audited (the audit trail is in the same database).
 */
export function withDatabaseOutage(tasks: TaskService, logger: Logger): TaskService {
  const guard = async <T>(verb: string, run: () => Promise<T>): Promise<T | TaskError> => {
    try {
      return await run();
    } catch (error) {
      if (!isDatabaseUnavailable(error)) throw withoutDriverText(error, verb, logger);
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
  };
  return {
    ...tasks,
    start: (input) => guard('start', () => tasks.start(input)),
    get: (taskId, ctx) => guard('get', () => tasks.get(taskId, ctx)),
    read: (taskId, ctx, options) =>
      guard(options.verb ?? 'get', () => tasks.read(taskId, ctx, options)),
    result: (taskId, ctx) => guard('result', () => tasks.result(taskId, ctx)),
    awaitResult: (taskId, ctx, waitMs) =>
      guard('result', () => tasks.awaitResult(taskId, ctx, waitMs)),
    cancel: (taskId, ctx, options) => guard('cancel', () => tasks.cancel(taskId, ctx, options)),
    list: (ctx, page) => guard('list', () => tasks.list(ctx, page)),
  };
}

/**
 * Any other PostgreSQL error is a bug, but the SDKs put a handler's error message on the
 * wire (-32603): its text (constraint names, input echoed back) goes to the log only.
 */
function withoutDriverText(error: unknown, verb: string, logger: Logger): unknown {
  const e = error as { code?: unknown; severity?: unknown; message?: unknown };
  const fromDriver =
    typeof e === 'object' &&
    e !== null &&
    typeof e.code === 'string' &&
    /^[0-9A-Z]{5}$/.test(e.code) &&
    typeof e.severity === 'string';
  if (!fromDriver) return error;
  logger.error('task verb failed in the database', { verb, code: e.code, error: e.message });
  return new Error('Internal error');
}
