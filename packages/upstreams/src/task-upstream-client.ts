import { ToolError, type UpstreamTaskClient, type UpstreamTaskRef } from '@mtg/tool-kit';
import { DownstreamUnavailable, type UnavailableCode } from '@mtg/tools';
import { coreTaskWire, openSession } from './core-task-wire.ts';
import { extTaskWire } from './ext-task-wire.ts';
import type { UpstreamConfig } from './upstream-config.ts';
import { isUpstreamError, type UpstreamError } from './upstream-error.ts';
import type { UpstreamGuard } from './upstream-guard.ts';
import {
  IDEMPOTENCY_KEY,
  toolResultOf,
  type UpstreamAuditType,
  type UpstreamTaskWire,
  type WireBase,
} from './upstream-task-wire.ts';
import { REVISION_2026, wire2026 } from './upstream-wire-2026.ts';

export type { UpstreamAuditType };

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
 * with the upstream code). A task is created on the task wire the upstream offers: the
 * 2026-07-28 tasks extension when `server/discover` says so (ext-task-wire.ts), else
 * 2025-11-25 core tasks after `initialize` (core-task-wire.ts); the ref names the wire, so
 * every later request (of this run or a resumed one) goes to the same implementation.
 */
export function createTaskUpstreamClient(deps: TaskUpstreamDeps): UpstreamTaskClient {
  const { upstream } = deps;
  let lastToken: string | undefined;
  const token = async () => (lastToken = await deps.token());

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
  const base: WireBase = {
    upstream,
    signal: deps.signal,
    token,
    reauthenticate: async () => {
      deps.invalidate();
      return token();
    },
    async guarded(work) {
      await deps.beforeCall();
      try {
        return await deps.guard.run(deps.signal, work);
      } catch (error) {
        if (deps.signal.aborted) throw deps.signal.reason;
        throw translate(error);
      }
    },
    audit: deps.audit,
    timeoutOf: (tool) => (tool ? upstream.tools[tool]?.timeoutMs : undefined) ?? upstream.timeoutMs,
    ...(deps.fetch ? { fetch: deps.fetch } : {}),
  };
  const core = coreTaskWire(base);
  const ext = extTaskWire(base);
  const wireOf = (ref: UpstreamTaskRef): UpstreamTaskWire =>
    ref.wire === REVISION_2026 ? ext : core;
  const releaseAll = () => Promise.all([core.release(undefined), ext.release(undefined)]);

  return {
    name: upstream.name,
    async createTask(tool, args, options) {
      const offers2026 = await base.guarded(() =>
        wire2026({
          upstream: upstream.name,
          url: upstream.url,
          token: base.token,
          reauthenticate: base.reauthenticate,
          maxResponseBytes: upstream.maxResponseBytes,
          ...(deps.fetch ? { fetch: deps.fetch } : {}),
        }).offersTasks({ signal: deps.signal, timeoutMs: upstream.timeoutMs }),
      );
      return (offers2026 ? ext : core).create(tool, args, options);
    },
    getTask: (ref) => wireOf(ref).get(ref),
    taskResult: (ref) => wireOf(ref).result(ref),
    question: (ref, state, o) => wireOf(ref).question(ref, state, o),
    answer: (ref, question, answer) => wireOf(ref).answer(ref, question, answer),
    async cancelTask(ref) {
      if (!deps.stopEndsTask()) {
        await releaseAll();
        return false;
      }
      // The run is already stopped: no boundary check, no exchange (a revoked user's
      // exchange is refused) — the last token of this run, bounded by its own timeout.
      const timeoutMs = deps.cancelTimeoutMs ?? 3000;
      const lastOnly = async () => lastToken ?? (await deps.token());
      let acknowledged = false;
      let failure: string | undefined;
      try {
        await wireOf(ref).cancel(ref, lastOnly, {
          signal: AbortSignal.timeout(timeoutMs),
          timeoutMs,
        });
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
      await releaseAll();
      return acknowledged;
    },
    async callTool(tool, args, options) {
      const started = performance.now();
      let outcome = 'ok';
      try {
        const raw = await base.guarded(async () => {
          const connection = await openSession(base);
          try {
            return await connection.request(
              'tools/call',
              { name: tool, arguments: args, _meta: { [IDEMPOTENCY_KEY]: options.idempotencyKey } },
              {
                signal: deps.signal,
                timeoutMs: base.timeoutOf(tool),
                ...(options.onProgress
                  ? { onProgress: (p) => options.onProgress!(p.progress, p.total, p.message) }
                  : {}),
              },
            );
          } finally {
            await connection.close({ terminate: true });
          }
        });
        const result = toolResultOf(raw, upstream.name, 'tools/call');
        if (result.isError === true) outcome = 'tool_error';
        return result;
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
          durationMs: Math.round(performance.now() - started),
        });
      }
    },
    async release(ref) {
      if (!ref) {
        await releaseAll();
        return;
      }
      await wireOf(ref).release(ref);
    },
  };
}

export type { UpstreamError };
