import {
  CreateTaskResultV2Schema,
  GetTaskResultV2Schema,
} from '@modelcontextprotocol/ext-tasks/core/v2';
import { ToolError, type ToolResult, type UpstreamTaskState } from '@mtg/tool-kit';
import {
  checked,
  endedAudit,
  IDEMPOTENCY_KEY,
  statusOf,
  toolResultOf,
  type UpstreamTaskWire,
  type WireBase,
} from './upstream-task-wire.ts';
import { REVISION_2026, wire2026 } from './upstream-wire-2026.ts';

/**
 * The 2026-07-28 tasks extension: stateless requests (no session), `tasks/get` carrying the
 * status, the input requests and, once completed, the result inline; `tasks/update` answers
 * input requests; `tasks/cancel` cancels. Replies are checked against the extension's schemas.
 */
export function extTaskWire(base: WireBase): UpstreamTaskWire {
  const { upstream } = base;
  const wireWith = (token: () => Promise<string>, reauthenticate: () => Promise<string>) =>
    wire2026({
      upstream: upstream.name,
      url: upstream.url,
      token,
      reauthenticate,
      maxResponseBytes: upstream.maxResponseBytes,
      ...(base.fetch ? { fetch: base.fetch } : {}),
    });
  const modern = wireWith(base.token, base.reauthenticate);
  const within = (tool?: string) => ({ signal: base.signal, timeoutMs: base.timeoutOf(tool) });
  const REF = { sessionId: null, protocolVersion: REVISION_2026, wire: REVISION_2026 } as const;

  const get = async (ref: { taskId: string }): Promise<UpstreamTaskState> => {
    const t = await base.guarded(() =>
      modern.request('tasks/get', { taskId: ref.taskId }, within()),
    );
    checked(GetTaskResultV2Schema, t, upstream.name, 'tasks/get');
    return detailedState(t, upstream.name);
  };

  return {
    /** tools/call: a CreateTaskResult, or (the server's choice) the result at once. */
    async create(tool, args, options) {
      const r = await base.guarded(() =>
        modern.request(
          'tools/call',
          { name: tool, arguments: args, _meta: { [IDEMPOTENCY_KEY]: options.idempotencyKey } },
          within(tool),
        ),
      );
      if (r.resultType !== 'task') {
        // Answered at once: no upstream task to follow.
        if (r.resultType !== undefined && r.resultType !== 'complete') {
          throw new ToolError(
            'upstream_protocol_error',
            `upstream ${upstream.name} answered tools/call with resultType ${JSON.stringify(r.resultType)}, which this gateway does not relay`,
          );
        }
        const result = toolResultOf(r, upstream.name, 'tools/call');
        await base.audit('upstream.call', {
          upstream: upstream.name,
          upstreamTool: tool,
          outcome: result.isError === true ? 'tool_error' : 'ok',
          wire: REVISION_2026,
        });
        return { ...REF, taskId: '', status: 'completed', result };
      }
      const task = checked(CreateTaskResultV2Schema, r, upstream.name, 'tools/call');
      await base.audit('upstream.task_created', {
        upstream: upstream.name,
        upstreamTool: tool,
        upstreamTaskId: task.taskId,
        session: false,
        wire: REVISION_2026,
      });
      return {
        ...REF,
        taskId: task.taskId,
        status: statusOf(task.status),
        ...(typeof task.pollIntervalMs === 'number' ? { pollIntervalMs: task.pollIntervalMs } : {}),
      };
    },
    async get(ref) {
      const state = await get(ref);
      if (state.result) await endedAudit(base, ref, state.result);
      return state;
    },
    async result(ref) {
      const state = await this.get(ref);
      if (!state.result) {
        throw new ToolError(
          'upstream_protocol_error',
          `upstream ${upstream.name} task ${ref.taskId} is ${state.status}, without a result`,
        );
      }
      return state.result;
    },
    async question(_ref, state, o) {
      const key = Object.keys(state.inputRequests ?? {}).find((k) => !o.answered.includes(k));
      if (key === undefined) return undefined;
      const r = state.inputRequests![key]!;
      return { key, message: r.message, requestedSchema: r.requestedSchema };
    },
    async answer(ref, question, answer) {
      await base.guarded(() =>
        modern.request(
          'tasks/update',
          { taskId: ref.taskId, inputResponses: { [question.key]: answer } },
          within(),
        ),
      );
    },
    async cancel(ref, token, bound) {
      await wireWith(token, token).request('tasks/cancel', { taskId: ref.taskId }, bound);
    },
    // Stateless: no session to end.
    async release() {},
  };
}

/** A 2026-07-28 DetailedTask: status, message, interval, input requests, the inline result. */
function detailedState(t: Record<string, unknown>, upstream: string): UpstreamTaskState {
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
    result = toolResultOf(t.result, upstream, 'its task');
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
