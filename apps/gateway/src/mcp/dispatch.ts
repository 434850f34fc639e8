import type { Principal } from '@mtg/identity';
import type { Workload } from '@mtg/policy';
import type { ProgressToken, TaskError, TaskRow, TaskService } from '@mtg/tasks';
import {
  toolListing,
  type Catalogue,
  type LongToolDefinition,
  type ToolListing,
  type ToolResult,
} from '@mtg/tools';
import type { RequestContext } from '../http/request-context.ts';
import { rpcErrorFor } from './task-errors.ts';
import type { ToolPolicy } from './tool-policy.ts';
import { pageOfTools, type ToolsPage } from './tools-page.ts';

/** How the caller's wire wants a long tool started. */
export type CallMode =
  | { kind: 'plain' } // no task support: answer with a job handle
  // 2025-11-25 `task` param; the request's progress token stays the task's (spec: tasks)
  | { kind: 'core-task'; ttlMs?: number; progressToken?: ProgressToken }
  | { kind: 'ext-task' }; // 2026-07-28 tasks extension

export interface CallContext {
  principal: Principal;
  /** The caller's access token, held for this request only: exchanged, never stored or forwarded. */
  token?: string;
  correlationId: string;
  idempotencyKey?: string;
  /** Why the explicit idempotency key given is unusable; a start is then refused (-32602). */
  idempotencyKeyRefusal?: string;
  deadlineMs?: number;
  wire: string;
  /** The calling workload (http/workload-identity.ts); the per-tool policy decides on it. */
  workload?: Workload;
}

export type DispatchOutcome =
  | { kind: 'result'; result: ToolResult }
  | { kind: 'task'; task: TaskRow }
  | { kind: 'error'; code: number; message: string; data?: Record<string, unknown> };

export type ListedTool = ToolListing & { execution?: { taskSupport: string } };

/** Era-independent tools/list and tools/call; adapters only translate shapes. */
export interface Dispatch {
  /** Every tool this caller may see (one list, unpaged: for the server's own checks). */
  listTools(principal: Principal, workload?: Workload): { tools: ListedTool[] };
  /** One page of tools/list (tools-page.ts); an unreadable cursor is `invalid_cursor`. */
  listToolsPage(
    principal: Principal,
    workload: Workload | undefined,
    cursor: string | undefined,
  ): ToolsPage<ListedTool>;
  /** Whether `name` is one of the long tools (started as a task), whoever asks. */
  isLongTool: (name: string) => boolean;
  callTool(
    params: { name: string; arguments?: unknown },
    mode: CallMode,
    ctx: CallContext,
  ): Promise<DispatchOutcome>;
  tasks: TaskService;
}

export function createDispatch(
  catalogue: Catalogue,
  longTools: ReadonlyMap<string, LongToolDefinition>,
  tasks: TaskService,
  /** Per-tool policy (POLICY_FILE); without one every tool the scopes allow is callable. */
  toolPolicy?: ToolPolicy,
): Dispatch {
  const invalid = (detail: string): DispatchOutcome => ({
    kind: 'result',
    result: { isError: true, content: [{ type: 'text', text: `Invalid arguments: ${detail}` }] },
  });
  const dispatch: Dispatch = {
    tasks,
    isLongTool: (name) => longTools.has(name),
    listToolsPage(principal, workload, cursor) {
      return pageOfTools(dispatch.listTools(principal, workload).tools, cursor);
    },
    listTools(principal, workload) {
      const allowed = (t: { name: string }) =>
        !toolPolicy || toolPolicy.permits(principal, workload, t.name);
      const instant = catalogue.visibleTo(principal).filter(allowed).map(toolListing);
      const long = [...longTools.values()]
        .filter((t) => principal.scopes.includes(t.scope) && allowed(t))
        .map((t) => {
          // No outputSchema: called plainly, a long tool answers with a job handle, which
          // clients would validate against it and reject. The result shape is in the text.
          const { outputSchema: _omit, ...listing } = toolListing({
            ...t,
            outputSchema: undefined,
            run: async () => ({ content: [] }),
          });
          return { ...listing, execution: { taskSupport: 'optional' } };
        });
      return { tools: [...instant, ...long] };
    },
    async callTool(params, mode, ctx) {
      // Before any tool code or task row: a tool the policy refuses is, to the caller, unknown.
      const known = longTools.has(params.name) || catalogue.get(params.name) !== undefined;
      if (toolPolicy && known) {
        const admitted = await toolPolicy.admit({
          tool: params.name,
          long: longTools.has(params.name),
          principal: ctx.principal,
          workload: ctx.workload,
          correlationId: ctx.correlationId,
          wire: ctx.wire,
        });
        if (!admitted)
          return { kind: 'error', code: -32602, message: `Unknown tool: ${params.name}` };
      }
      const long = longTools.get(params.name);
      if (!long) {
        const outcome = await catalogue.call(
          ctx.principal,
          params.name,
          params.arguments,
          ctx.correlationId,
          ctx.token,
          ctx.workload,
        );
        if (outcome.ok) return { kind: 'result', result: outcome.result };
        // Scope is enforced at HTTP level first (403); a tool the caller cannot see is unknown.
        return { kind: 'error', code: -32602, message: `Unknown tool: ${params.name}` };
      }
      if (!ctx.principal.scopes.includes(long.scope)) {
        return { kind: 'error', code: -32602, message: `Unknown tool: ${params.name}` };
      }
      if (ctx.idempotencyKeyRefusal !== undefined) {
        // Never replaced by the derived key: the caller asked for a key it did not get.
        return {
          kind: 'error',
          code: -32602,
          message: ctx.idempotencyKeyRefusal,
          data: { reason: 'invalid_idempotency_key', maxLength: MAX_IDEMPOTENCY_KEY_LENGTH },
        };
      }
      const parsed = long.inputSchema.safeParse(params.arguments ?? {});
      if (!parsed.success) {
        return invalid(
          parsed.error.issues
            .map((i) => `${i.path.join('.') || '(arguments)'}: ${i.message}`)
            .join('; '),
        );
      }
      const started = await tasks.start({
        principal: ctx.principal,
        tool: long,
        args: parsed.data,
        correlationId: ctx.correlationId,
        wire: ctx.wire,
        ...(ctx.token ? { subjectToken: ctx.token } : {}),
        ...(ctx.idempotencyKey !== undefined ? { idempotencyKey: ctx.idempotencyKey } : {}),
        ...(ctx.deadlineMs !== undefined ? { deadlineMs: ctx.deadlineMs } : {}),
        ...(mode.kind === 'core-task' && mode.ttlMs !== undefined ? { ttlMs: mode.ttlMs } : {}),
        ...(mode.kind === 'core-task' && mode.progressToken !== undefined
          ? { progressToken: mode.progressToken }
          : {}),
      });
      if (!started.ok) {
        if (mode.kind === 'plain') return { kind: 'result', result: toolErrorFor(started) };
        return { kind: 'error', ...rpcErrorFor(started) };
      }
      if (mode.kind === 'plain')
        return { kind: 'result', result: jobHandle(started.task, started.created) };
      return { kind: 'task', task: started.task };
    },
  };
  return dispatch;
}

/** What a client without task support gets at once from a long tool. */
export function jobHandle(task: TaskRow, created: boolean): ToolResult {
  const handle = {
    jobId: task.id,
    status: task.status,
    tool: task.tool,
    pollIntervalMs: task.poll_interval_ms,
    deadline: task.deadline.toISOString(),
    deduplicated: !created,
    next: `Call get_job_status with {"jobId":"${task.id}"} until status is completed, failed or cancelled, then get_job_result.`,
  };
  return {
    content: [
      {
        type: 'text',
        text:
          `${created ? 'Started' : 'Already running (same request)'}: job ${task.id} (${task.tool}). ` +
          `Poll get_job_status every ${Math.round(task.poll_interval_ms / 1000) || 1}s; fetch the result with get_job_result.`,
      },
    ],
    structuredContent: handle,
  };
}

export function toolErrorFor(error: TaskError): ToolResult {
  return {
    isError: true,
    content: [{ type: 'text', text: error.message }],
    structuredContent: {
      error: error.code,
      ...(error.retryAfterSeconds !== undefined
        ? { retryAfterSeconds: error.retryAfterSeconds }
        : {}),
    },
  };
}

/** One MCP request's call context: the HTTP request's context, and what its `_meta` asks. */
export function callContextFrom(
  request: RequestContext,
  meta: Record<string, unknown> | undefined,
  wire: string,
): CallContext {
  const key = explicitKey(meta, request.idempotencyKeyHeader);
  const deadline = meta?.[DEADLINE_META_KEY];
  return {
    principal: request.principal,
    correlationId: request.correlationId,
    wire,
    token: request.token,
    ...(request.workload ? { workload: request.workload } : {}),
    ...(key === undefined
      ? {}
      : typeof key === 'string'
        ? { idempotencyKey: key }
        : { idempotencyKeyRefusal: key.refusal }),
    ...(typeof deadline === 'number' && Number.isFinite(deadline) && deadline > 0
      ? { deadlineMs: deadline }
      : {}),
  };
}

/** Where a client puts an explicit idempotency key (or the `Idempotency-Key` header). */
export const IDEMPOTENCY_META_KEY = 'io.mcp-task-gateway/idempotency-key';
export const MAX_IDEMPOTENCY_KEY_LENGTH = 200;

/**
 * The explicit idempotency key of a request: `_meta[IDEMPOTENCY_META_KEY]` if the request
 * has one, else the `Idempotency-Key` header; undefined if neither. A key present but not a
 * string of 1 to MAX_IDEMPOTENCY_KEY_LENGTH characters is refused, never ignored.
 */
function explicitKey(
  meta: Record<string, unknown> | undefined,
  header: unknown,
): string | { refusal: string } | undefined {
  const fromMeta = meta !== undefined && Object.hasOwn(meta, IDEMPOTENCY_META_KEY);
  const key = fromMeta ? meta[IDEMPOTENCY_META_KEY] : header;
  if (key === undefined) return undefined;
  if (typeof key === 'string' && key.length >= 1 && key.length <= MAX_IDEMPOTENCY_KEY_LENGTH)
    return key;
  const where = fromMeta ? `_meta["${IDEMPOTENCY_META_KEY}"]` : 'the Idempotency-Key header';
  const got = typeof key === 'string' ? `${key.length} characters` : `a ${kindOf(key)}`;
  return {
    refusal:
      `Invalid params: the idempotency key in ${where} must be a string of 1 to ` +
      `${MAX_IDEMPOTENCY_KEY_LENGTH} characters (got ${got})`,
  };
}

const kindOf = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);
/** Where a client asks for a deadline (ms from now; capped per tool). */
export const DEADLINE_META_KEY = 'io.mcp-task-gateway/deadline-ms';
