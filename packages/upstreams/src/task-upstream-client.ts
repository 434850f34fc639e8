import {
  ToolError,
  type ToolResult,
  type UpstreamTaskClient,
  type UpstreamTaskRef,
  type UpstreamTaskState,
} from '@mtg/tool-kit';
import { DownstreamUnavailable, type UnavailableCode } from '@mtg/tools';
import { connectUpstream, type UpstreamConnection } from './connect-upstream.ts';
import type { UpstreamConfig } from './upstream-config.ts';
import { isUpstreamError, type UpstreamError } from './upstream-error.ts';
import type { UpstreamGuard } from './upstream-guard.ts';
import { REVISION_2026, wire2026 } from './upstream-wire-2026.ts';

export type UpstreamAuditType =
  'upstream.task_created' | 'upstream.task_cancelled' | 'upstream.task_ended' | 'upstream.call';

export interface TaskUpstreamDeps {
  upstream: UpstreamConfig;
  guard: UpstreamGuard;
  /** The task's token for the upstream's audience (exchanged per stage, worker as actor). */
  token: () => Promise<string>;
  /** After a 401: the next token is exchanged afresh. */
  invalidate: () => void;
  /** The run's signal: aborted on cancel, revocation, deadline, lost lease, shutdown. */
  signal: AbortSignal;
  /**
   * Whether the run's stop ends the task (cancel, revocation, deadline): only then is the
   * upstream task cancelled. After a shutdown or a lost lease it is left running for the
   * worker that resumes it.
   */
  stopEndsTask: () => boolean;
  /** The task's boundary check, before every request that does work. */
  beforeCall: () => Promise<void>;
  audit: (type: UpstreamAuditType, data: Record<string, unknown>) => Promise<void>;
  /** Bound on the acknowledgement of a cancel. */
  cancelTimeoutMs?: number;
  fetch?: typeof fetch;
}

const UNAVAILABLE: Record<string, UnavailableCode> = {
  upstream_circuit_open: 'circuit_open',
  upstream_timeout: 'timeout',
  upstream_unreachable: 'unreachable',
  upstream_server_error: 'server_error',
};

/**
 * The worker's client of one upstream for one task. Transient trouble (unreachable, timeouts,
 * 5xx, an open circuit) comes out as DownstreamUnavailable, so the task waits with a status
 * message and resumes from its journal; every other failure is the tool's error (a ToolError
 * with the upstream code). Sessions are opened per run and resumed by their journaled id.
 * A task is created on the task wire the upstream offers: the 2026-07-28 tasks extension
 * when `server/discover` says so (stateless: no session; the result comes inline with
 * tasks/get), else 2025-11-25 core tasks after `initialize`; the ref names the wire, so every
 * later request (of this run or a resumed one) stays on it.
 */
export function createTaskUpstreamClient(deps: TaskUpstreamDeps): UpstreamTaskClient {
  const { upstream } = deps;
  const sessions = new Map<string, Promise<UpstreamConnection>>();
  let lastToken: string | undefined;
  const token = async () => (lastToken = await deps.token());
  const reauthenticate = async () => {
    deps.invalidate();
    return token();
  };
  // The elicitations the upstream sent on a tasks/result stream, for `question`.
  const elicited: Array<{ id: string | number; params: Record<string, unknown> }> = [];
  const heard = new Set<() => void>();
  // Task sessions declare elicitation (an upstream task's question is relayed); a plain
  // tools/call's session does not, so nothing waits on a question nobody would see.
  const open = (resume?: { sessionId: string; protocolVersion?: string }, plain = false) =>
    connectUpstream({
      ...(plain
        ? {}
        : {
            onElicitation: (request: { id: string | number; params: Record<string, unknown> }) => {
              elicited.push(request);
              for (const h of heard) h();
            },
          }),
      upstream: upstream.name,
      url: upstream.url,
      token,
      reauthenticate,
      maxResponseBytes: upstream.maxResponseBytes,
      timeoutMs: upstream.timeoutMs,
      signal: deps.signal,
      ...(resume ? { resume } : {}),
      ...(deps.fetch ? { fetch: deps.fetch } : {}),
    });
  const modern = wire2026({
    upstream: upstream.name,
    url: upstream.url,
    token,
    reauthenticate,
    maxResponseBytes: upstream.maxResponseBytes,
    ...(deps.fetch ? { fetch: deps.fetch } : {}),
  });
  const on2026 = (ref: UpstreamTaskRef) => ref.wire === REVISION_2026;
  const sessionFor = (ref: UpstreamTaskRef): Promise<UpstreamConnection> => {
    const key = ref.sessionId ?? '';
    let s = sessions.get(key);
    if (!s) {
      s = ref.sessionId
        ? open({
            sessionId: ref.sessionId,
            ...(ref.protocolVersion ? { protocolVersion: ref.protocolVersion } : {}),
          })
        : open();
      s.catch(() => sessions.delete(key));
      sessions.set(key, s);
    }
    return s;
  };
  const timeoutOf = (tool?: string) =>
    (tool ? upstream.tools[tool]?.timeoutMs : undefined) ?? upstream.timeoutMs;

  const guarded = async <T>(work: () => Promise<T>): Promise<T> => {
    await deps.beforeCall();
    try {
      return await deps.guard.run(deps.signal, work);
    } catch (error) {
      if (deps.signal.aborted) throw deps.signal.reason;
      throw translate(error);
    }
  };
  const translate = (error: unknown): unknown => {
    if (!isUpstreamError(error)) return error;
    const unavailable = UNAVAILABLE[error.code];
    if (unavailable) {
      return new DownstreamUnavailable(
        unavailable,
        `upstream:${upstream.name}`,
        deps.guard.retryAfterMs(),
        error.message,
        error,
      );
    }
    return new ToolError(error.code, error.message, { cause: error });
  };

  const endedAudit = (ref: UpstreamTaskRef, result: ToolResult) =>
    deps.audit('upstream.task_ended', {
      upstream: upstream.name,
      upstreamTaskId: ref.taskId,
      status: 'completed',
      isError: result.isError === true,
      ...(ref.wire ? { wire: ref.wire } : {}),
    });

  const getTask2026 = async (ref: UpstreamTaskRef): Promise<UpstreamTaskState> => {
    const t = await guarded(() =>
      modern.request(
        'tasks/get',
        { taskId: ref.taskId },
        { signal: deps.signal, timeoutMs: upstream.timeoutMs },
      ),
    );
    const state = detailedState(t);
    if (state.result) await endedAudit(ref, state.result);
    return state;
  };

  /** tools/call on the 2026-07-28 wire: a CreateTaskResult, or (the server's choice) the result. */
  const createOn2026 = async (
    tool: string,
    args: Record<string, unknown>,
    options: { idempotencyKey: string; ttlMs?: number },
  ): Promise<UpstreamTaskRef & UpstreamTaskState> => {
    const r = await guarded(() =>
      modern.request(
        'tools/call',
        {
          name: tool,
          arguments: args,
          _meta: { 'io.mcp-task-gateway/idempotency-key': options.idempotencyKey },
        },
        { signal: deps.signal, timeoutMs: timeoutOf(tool) },
      ),
    );
    const base = { sessionId: null, protocolVersion: REVISION_2026, wire: REVISION_2026 } as const;
    if (r.resultType !== 'task') {
      // Answered at once: no upstream task to follow.
      if (r.resultType !== undefined && r.resultType !== 'complete') {
        throw new ToolError(
          'upstream_protocol_error',
          `upstream ${upstream.name} answered tools/call with resultType ${JSON.stringify(r.resultType)}, which this gateway does not relay`,
        );
      }
      const result = callResultOf(r);
      await deps.audit('upstream.call', {
        upstream: upstream.name,
        upstreamTool: tool,
        outcome: result.isError === true ? 'tool_error' : 'ok',
        wire: REVISION_2026,
      });
      return { ...base, taskId: '', status: 'completed', result };
    }
    if (typeof r.taskId !== 'string' || r.taskId === '') {
      throw new ToolError(
        'upstream_protocol_error',
        `upstream ${upstream.name} answered tools/call with a task without a taskId`,
      );
    }
    const ref = { ...base, taskId: r.taskId };
    await deps.audit('upstream.task_created', {
      upstream: upstream.name,
      upstreamTool: tool,
      upstreamTaskId: ref.taskId,
      session: false,
      wire: ref.wire,
    });
    return {
      ...ref,
      status: statusOf(r.status),
      ...(typeof r.pollIntervalMs === 'number' ? { pollIntervalMs: r.pollIntervalMs } : {}),
    };
  };

  return {
    name: upstream.name,
    async createTask(tool, args, options) {
      const offers2026 = await guarded(() =>
        modern.offersTasks({ signal: deps.signal, timeoutMs: upstream.timeoutMs }),
      );
      if (offers2026) return createOn2026(tool, args, options);
      return guarded(async () => {
        const connection = await open();
        sessions.set(connection.sessionId ?? '', Promise.resolve(connection));
        const result = await connection
          .request(
            'tools/call',
            {
              name: tool,
              arguments: args,
              task: options.ttlMs ? { ttl: options.ttlMs } : {},
              _meta: { 'io.mcp-task-gateway/idempotency-key': options.idempotencyKey },
            },
            { signal: deps.signal, timeoutMs: timeoutOf(tool) },
          )
          .catch(async (error: unknown) => {
            sessions.delete(connection.sessionId ?? '');
            await connection.close();
            throw error;
          });
        const task = result.task as Record<string, unknown> | undefined;
        if (!task || typeof task.taskId !== 'string') {
          throw new ToolError(
            'upstream_protocol_error',
            `upstream ${upstream.name} answered tools/call without a task`,
          );
        }
        const ref = {
          taskId: task.taskId,
          sessionId: connection.sessionId ?? null,
          protocolVersion: connection.protocolVersion ?? null,
          wire: '2025-11-25' as const,
        };
        await deps.audit('upstream.task_created', {
          upstream: upstream.name,
          upstreamTool: tool,
          upstreamTaskId: ref.taskId,
          session: ref.sessionId !== null,
          wire: ref.wire,
        });
        return {
          ...ref,
          status: statusOf(task.status),
          ...(typeof task.pollInterval === 'number' ? { pollIntervalMs: task.pollInterval } : {}),
        };
      });
    },
    async getTask(ref) {
      if (on2026(ref)) return getTask2026(ref);
      return guarded(async () => {
        const connection = await sessionFor(ref);
        const t = await connection.request(
          'tasks/get',
          { taskId: ref.taskId },
          { signal: deps.signal, timeoutMs: upstream.timeoutMs },
        );
        return {
          status: statusOf(t.status),
          ...(typeof t.statusMessage === 'string' ? { statusMessage: t.statusMessage } : {}),
          ...(typeof t.pollInterval === 'number' ? { pollIntervalMs: t.pollInterval } : {}),
        };
      });
    },
    async taskResult(ref) {
      if (on2026(ref)) {
        const state = await getTask2026(ref);
        if (!state.result) {
          throw new ToolError(
            'upstream_protocol_error',
            `upstream ${upstream.name} task ${ref.taskId} is ${state.status}, without a result`,
          );
        }
        return state.result;
      }
      const result = await guarded(async () => {
        const connection = await sessionFor(ref);
        return connection.request(
          'tasks/result',
          { taskId: ref.taskId },
          { signal: deps.signal, timeoutMs: upstream.timeoutMs },
        );
      });
      await endedAudit(ref, result as unknown as ToolResult);
      return result as unknown as ToolResult;
    },
    async question(ref, state, o) {
      if (on2026(ref)) {
        const key = Object.keys(state.inputRequests ?? {}).find((k) => !o.answered.includes(k));
        if (key === undefined) return undefined;
        const r = state.inputRequests![key]!;
        return { key, message: r.message, requestedSchema: r.requestedSchema };
      }
      // 2025-11-25: the upstream sends its elicitation on the tasks/result stream (queued
      // for the task); tasks/result otherwise waits for the result, so it is bounded here and
      // given up once a question came.
      const found = () =>
        elicited.find((e) => {
          const related = (e.params._meta as Record<string, { taskId?: unknown }> | undefined)?.[
            RELATED_TASK
          ]?.taskId;
          return (
            (related === undefined || related === ref.taskId) && !o.answered.includes(keyOf(e.id))
          );
        });
      if (!found()) {
        const stop = new AbortController();
        const onHeard = () => {
          if (found()) stop.abort();
        };
        heard.add(onHeard);
        try {
          await guarded(async () => {
            const connection = await sessionFor(ref);
            await connection
              .request(
                'tasks/result',
                { taskId: ref.taskId },
                { signal: AbortSignal.any([deps.signal, stop.signal]), timeoutMs: o.waitMs },
              )
              .catch((error: unknown) => {
                // Stopped because the question came, or its bound passed: not a failure.
                // An upstream that refuses tasks/result before the end has no question here.
                if (
                  stop.signal.aborted ||
                  (isUpstreamError(error) &&
                    (error.code === 'upstream_timeout' || error.code === 'upstream_refused'))
                )
                  return;
                throw error;
              });
          });
        } finally {
          heard.delete(onHeard);
        }
      }
      const e = found();
      if (!e) return undefined;
      return {
        key: keyOf(e.id),
        requestId: e.id,
        message: typeof e.params.message === 'string' ? e.params.message : '',
        requestedSchema: (e.params.requestedSchema as Record<string, unknown>) ?? {},
      };
    },
    async answer(ref, question, answer) {
      if (on2026(ref)) {
        await guarded(() =>
          modern.request(
            'tasks/update',
            { taskId: ref.taskId, inputResponses: { [question.key]: answer } },
            { signal: deps.signal, timeoutMs: upstream.timeoutMs },
          ),
        );
        return;
      }
      if (question.requestId === undefined)
        throw new TypeError('a 2025-11-25 upstream question needs its request id');
      await guarded(async () => {
        const connection = await sessionFor(ref);
        await connection.respond(question.requestId!, { ...answer });
      });
    },
    async cancelTask(ref) {
      if (!deps.stopEndsTask()) {
        await closeAll(sessions);
        return false;
      }
      // The run is already stopped: no boundary check, no exchange (a revoked user's
      // exchange is refused) — the last token of this run, bounded by its own timeout.
      const bound = AbortSignal.timeout(deps.cancelTimeoutMs ?? 3000);
      const lastOnly = async () => lastToken ?? (await deps.token());
      const within = { signal: bound, timeoutMs: deps.cancelTimeoutMs ?? 3000 };
      const send = async () => {
        if (on2026(ref)) {
          // Stateless: no session to resume.
          await wire2026({
            upstream: upstream.name,
            url: upstream.url,
            token: lastOnly,
            reauthenticate: lastOnly,
            maxResponseBytes: upstream.maxResponseBytes,
            ...(deps.fetch ? { fetch: deps.fetch } : {}),
          }).request('tasks/cancel', { taskId: ref.taskId }, within);
          return;
        }
        const connection = await connectUpstream({
          upstream: upstream.name,
          url: upstream.url,
          token: lastOnly,
          reauthenticate: lastOnly,
          maxResponseBytes: upstream.maxResponseBytes,
          timeoutMs: within.timeoutMs,
          signal: bound,
          ...(ref.sessionId
            ? {
                resume: {
                  sessionId: ref.sessionId,
                  ...(ref.protocolVersion ? { protocolVersion: ref.protocolVersion } : {}),
                },
              }
            : {}),
          ...(deps.fetch ? { fetch: deps.fetch } : {}),
        });
        try {
          await connection.request('tasks/cancel', { taskId: ref.taskId }, within);
        } finally {
          await connection.close();
        }
      };
      let acknowledged = false;
      let failure: string | undefined;
      try {
        await send();
        acknowledged = true;
      } catch (error) {
        failure = isUpstreamError(error) ? error.code : 'upstream_timeout';
      }
      await deps.audit('upstream.task_cancelled', {
        upstream: upstream.name,
        upstreamTaskId: ref.taskId,
        acknowledged,
        ...(failure ? { error: failure } : {}),
      });
      await closeAll(sessions);
      return acknowledged;
    },
    async callTool(tool, args, options) {
      const started = Date.now();
      let outcome = 'ok';
      try {
        const result = await guarded(async () => {
          const connection = await open(undefined, true);
          try {
            return await connection.request(
              'tools/call',
              {
                name: tool,
                arguments: args,
                _meta: { 'io.mcp-task-gateway/idempotency-key': options.idempotencyKey },
              },
              {
                signal: deps.signal,
                timeoutMs: timeoutOf(tool),
                ...(options.onProgress
                  ? { onProgress: (p) => options.onProgress!(p.progress, p.total, p.message) }
                  : {}),
              },
            );
          } finally {
            await connection.close({ terminate: true });
          }
        });
        if (result.isError === true) outcome = 'tool_error';
        return result as unknown as ToolResult;
      } catch (error) {
        outcome = deps.signal.aborted
          ? 'cancelled'
          : ((error as { code?: string }).code ?? 'error');
        throw error;
      } finally {
        await deps.audit('upstream.call', {
          upstream: upstream.name,
          upstreamTool: tool,
          outcome,
          durationMs: Date.now() - started,
        });
      }
    },
    async release(ref) {
      if (!ref) {
        await closeAll(sessions);
        return;
      }
      if (on2026(ref)) return; // stateless: no session to end
      const s = sessions.get(ref.sessionId ?? '');
      sessions.delete(ref.sessionId ?? '');
      const c = await s?.catch(() => undefined);
      await c?.close({ terminate: true });
    },
  };
}

const RELATED_TASK = 'io.modelcontextprotocol/related-task';
/** A 2025-11-25 question's key: its JSON-RPC id, typed (1 and "1" are different ids). */
const keyOf = (id: string | number) => `${typeof id}:${id}`;

async function closeAll(sessions: Map<string, Promise<UpstreamConnection>>) {
  for (const s of sessions.values()) {
    const c = await s.catch(() => undefined);
    await c?.close();
  }
  sessions.clear();
}

/** A CallToolResult as the 2026-07-28 wire carries it (its `resultType` dropped). */
function callResultOf(r: Record<string, unknown>): ToolResult {
  const { resultType: _type, ...rest } = r;
  if (!Array.isArray(rest.content)) {
    throw new ToolError('upstream_protocol_error', 'upstream result without content');
  }
  return rest as unknown as ToolResult;
}

/** A 2026-07-28 DetailedTask: status, message, interval, and the inline result or error. */
function detailedState(t: Record<string, unknown>): UpstreamTaskState {
  const status = statusOf(t.status);
  const error = t.error as { message?: unknown } | undefined;
  const statusMessage =
    typeof t.statusMessage === 'string'
      ? t.statusMessage
      : status === 'failed' && typeof error?.message === 'string'
        ? error.message
        : undefined;
  let result: ToolResult | undefined;
  if (status === 'completed') {
    if (!t.result || typeof t.result !== 'object') {
      throw new ToolError(
        'upstream_protocol_error',
        'upstream task completed without its result (the 2026-07-28 wire inlines it)',
      );
    }
    result = callResultOf(t.result as Record<string, unknown>);
  }
  const inputRequests = status === 'input_required' ? formRequestsOf(t.inputRequests) : {};
  return {
    status,
    ...(statusMessage ? { statusMessage } : {}),
    ...(typeof t.pollIntervalMs === 'number' ? { pollIntervalMs: t.pollIntervalMs } : {}),
    ...(result ? { result } : {}),
    ...(Object.keys(inputRequests).length ? { inputRequests } : {}),
  };
}

/** The form-mode elicitations of `inputRequests` (other kinds, such as sampling, are not relayed). */
function formRequestsOf(value: unknown): NonNullable<UpstreamTaskState['inputRequests']> {
  const out: NonNullable<UpstreamTaskState['inputRequests']> = {};
  if (!value || typeof value !== 'object') return out;
  for (const [key, r] of Object.entries(value as Record<string, unknown>)) {
    const { method, params } = (r ?? {}) as { method?: unknown; params?: Record<string, unknown> };
    if (method !== 'elicitation/create' || !params || (params.mode ?? 'form') !== 'form') continue;
    if (typeof params.message !== 'string' || !params.requestedSchema) continue;
    out[key] = {
      message: params.message,
      requestedSchema: params.requestedSchema as Record<string, unknown>,
    };
  }
  return out;
}

function statusOf(
  value: unknown,
): 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled' {
  if (
    value === 'working' ||
    value === 'input_required' ||
    value === 'completed' ||
    value === 'failed' ||
    value === 'cancelled'
  )
    return value;
  throw new ToolError(
    'upstream_protocol_error',
    `upstream task status ${JSON.stringify(value)} is not an MCP task status`,
  );
}

export type { UpstreamError };
