import { CreateTaskResultSchema, GetTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import type { UpstreamTaskRef } from '@mtg/tool-kit';
import { connectUpstream, type UpstreamConnection } from './connect-upstream.ts';
import { isUpstreamError } from './upstream-error.ts';
import {
  checked,
  endedAudit,
  IDEMPOTENCY_KEY,
  statusOf,
  toolResultOf,
  type UpstreamTaskWire,
  type WireBase,
} from './upstream-task-wire.ts';

type Elicitation = { id: string | number; params: Record<string, unknown> };
const RELATED_TASK = 'io.modelcontextprotocol/related-task';
/** A question's key: its JSON-RPC id, typed (1 and "1" are different ids). */
const keyOf = (id: string | number) => `${typeof id}:${id}`;

/**
 * One MCP session with the upstream, for this task's run: the options built here once. A
 * task session declares form-mode elicitation and hands what the upstream asks to `onAsk`;
 * a `plain` one (a tools/call without a task) declares nothing, so nothing waits on a
 * question nobody would see.
 */
export function openSession(
  base: WireBase,
  o: {
    resume?: { sessionId: string; protocolVersion?: string };
    onAsk?: (e: Elicitation) => void;
    token?: () => Promise<string>;
    signal?: AbortSignal;
    timeoutMs?: number;
  } = {},
): Promise<UpstreamConnection> {
  return connectUpstream({
    upstream: base.upstream.name,
    url: base.upstream.url,
    token: o.token ?? base.token,
    reauthenticate: o.token ?? base.reauthenticate,
    maxResponseBytes: base.upstream.maxResponseBytes,
    timeoutMs: o.timeoutMs ?? base.upstream.timeoutMs,
    signal: o.signal ?? base.signal,
    ...(o.resume ? { resume: o.resume } : {}),
    ...(o.onAsk ? { onElicitation: o.onAsk } : {}),
    ...(base.fetch ? { fetch: base.fetch } : {}),
  });
}

const resumeOf = (ref: UpstreamTaskRef) =>
  ref.sessionId
    ? {
        sessionId: ref.sessionId,
        ...(ref.protocolVersion ? { protocolVersion: ref.protocolVersion } : {}),
      }
    : undefined;

/**
 * 2025-11-25 core tasks: `initialize`, then `tools/call` with `task`, `tasks/get`,
 * `tasks/result`, `tasks/cancel`, all on the MCP session the task was created in (resumed
 * by its journaled id). Replies are checked against the SDK's result schemas. A question is
 * the `elicitation/create` the upstream sends on the tasks/result stream; its answer is the
 * JSON-RPC response, POSTed on the same session.
 */
export function coreTaskWire(base: WireBase): UpstreamTaskWire {
  const { upstream } = base;
  const sessions = new Map<string, Promise<UpstreamConnection>>();
  // What the upstream asked on a tasks/result stream, for `question`.
  const elicited: Elicitation[] = [];
  const heard = new Set<() => void>();
  const onAsk = (e: Elicitation) => {
    elicited.push(e);
    for (const h of heard) h();
  };
  const sessionFor = (ref: UpstreamTaskRef): Promise<UpstreamConnection> => {
    const key = ref.sessionId ?? '';
    let s = sessions.get(key);
    if (!s) {
      const resume = resumeOf(ref);
      s = openSession(base, { onAsk, ...(resume ? { resume } : {}) });
      s.catch(() => sessions.delete(key));
      sessions.set(key, s);
    }
    return s;
  };
  const closeAll = async () => {
    for (const s of sessions.values()) {
      const c = await s.catch(() => undefined);
      await c?.close();
    }
    sessions.clear();
  };
  const within = (timeoutMs = upstream.timeoutMs) => ({ signal: base.signal, timeoutMs });

  return {
    create(tool, args, options) {
      return base.guarded(async () => {
        const connection = await openSession(base, { onAsk });
        sessions.set(connection.sessionId ?? '', Promise.resolve(connection));
        const raw = await connection
          .request(
            'tools/call',
            {
              name: tool,
              arguments: args,
              task: options.ttlMs ? { ttl: options.ttlMs } : {},
              _meta: { [IDEMPOTENCY_KEY]: options.idempotencyKey },
            },
            within(base.timeoutOf(tool)),
          )
          .catch(async (error: unknown) => {
            sessions.delete(connection.sessionId ?? '');
            await connection.close();
            throw error;
          });
        const { task } = checked(
          CreateTaskResultSchema,
          raw,
          upstream.name,
          'tools/call with a task',
        );
        const ref = {
          taskId: task.taskId,
          sessionId: connection.sessionId ?? null,
          protocolVersion: connection.protocolVersion ?? null,
          wire: '2025-11-25' as const,
        };
        await base.audit('upstream.task_created', {
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
    get(ref) {
      return base.guarded(async () => {
        const connection = await sessionFor(ref);
        const raw = await connection.request('tasks/get', { taskId: ref.taskId }, within());
        const t = checked(GetTaskResultSchema, raw, upstream.name, 'tasks/get');
        return {
          status: statusOf(t.status),
          ...(typeof t.statusMessage === 'string' ? { statusMessage: t.statusMessage } : {}),
          ...(typeof t.pollInterval === 'number' ? { pollIntervalMs: t.pollInterval } : {}),
        };
      });
    },
    async result(ref) {
      const raw = await base.guarded(async () => {
        const connection = await sessionFor(ref);
        return connection.request('tasks/result', { taskId: ref.taskId }, within());
      });
      const result = toolResultOf(raw, upstream.name, 'tasks/result');
      await endedAudit(base, ref, result);
      return result;
    },
    async question(ref, _state, o) {
      // The upstream sends its question on the tasks/result stream (queued for the task);
      // tasks/result otherwise waits for the result, so it is bounded here and given up once
      // a question came.
      const found = () =>
        elicited.find((e) => {
          const meta = e.params._meta as Record<string, { taskId?: unknown }> | undefined;
          const related = meta?.[RELATED_TASK]?.taskId;
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
          await base.guarded(async () => {
            const connection = await sessionFor(ref);
            await connection
              .request(
                'tasks/result',
                { taskId: ref.taskId },
                { signal: AbortSignal.any([base.signal, stop.signal]), timeoutMs: o.waitMs },
              )
              .catch((error: unknown) => {
                // Stopped because the question came, or its bound passed; an upstream that
                // refuses tasks/result before the end has no question here.
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
      const id = question.requestId;
      if (id === undefined) throw new TypeError('a 2025-11-25 upstream question needs its id');
      await base.guarded(async () => {
        const connection = await sessionFor(ref);
        await connection.respond(id, { ...answer });
      });
    },
    async cancel(ref, token, bound) {
      const resume = resumeOf(ref);
      const connection = await openSession(base, {
        token,
        signal: bound.signal,
        timeoutMs: bound.timeoutMs,
        ...(resume ? { resume } : {}),
      });
      try {
        await connection.request('tasks/cancel', { taskId: ref.taskId }, bound);
      } finally {
        await connection.close();
      }
    },
    async release(ref) {
      if (!ref) return closeAll();
      const s = sessions.get(ref.sessionId ?? '');
      sessions.delete(ref.sessionId ?? '');
      const c = await s?.catch(() => undefined);
      await c?.close({ terminate: true });
    },
  };
}
