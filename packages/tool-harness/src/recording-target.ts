import type { Json, TargetClient, WriteOptions } from '@mtg/tool-kit';

/** One call a tool made to a recording target. */
export interface RecordedCall {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  body?: Json;
  idempotencyKey?: string;
  taskId: string;
  /** Which run of the task made it (1 for the first, 2 after a simulated crash, …). */
  run: number;
}

export interface RecordingTarget {
  name: string;
  calls: RecordedCall[];
  /** Writes (non-GET calls), in order; of one task when `taskId` is given. */
  writes(taskId?: string): RecordedCall[];
  /** Idempotency keys that more than one write carried: a repeated write. */
  repeatedWrites(taskId?: string): string[];
  /** Answers the next calls with this handler (default: `{ ok: true }`). */
  respond(handler: (call: RecordedCall) => Json | Promise<Json>): void;
  /** The client the harness hands the tool, each call after the task's boundary check. */
  clientFor(taskId: string, run: () => number, beforeCall: () => Promise<void>): TargetClient;
}

/**
 * A stand-in for a downstream system, in process: records every call the tool makes through
 * `ctx.target(name)` and answers it. A fake, named as such: use a real target (its URL) to
 * test against the real system.
 */
export function recordingTarget(name: string): RecordingTarget {
  const calls: RecordedCall[] = [];
  let handler: (call: RecordedCall) => Json | Promise<Json> = () => ({ ok: true });
  return {
    name,
    calls,
    writes: (taskId) =>
      calls.filter((c) => c.method !== 'GET' && (taskId === undefined || c.taskId === taskId)),
    repeatedWrites(taskId) {
      const seen = new Map<string, number>();
      for (const c of calls) {
        if (taskId !== undefined && c.taskId !== taskId) continue;
        if (c.idempotencyKey) seen.set(c.idempotencyKey, (seen.get(c.idempotencyKey) ?? 0) + 1);
      }
      return [...seen].filter(([, n]) => n > 1).map(([k]) => k);
    },
    respond(h) {
      handler = h;
    },
    clientFor(taskId, run, beforeCall) {
      const record = async (call: Omit<RecordedCall, 'run' | 'taskId'>) => {
        await beforeCall();
        const recorded = { ...call, taskId, run: run() };
        calls.push(recorded);
        return handler(recorded);
      };
      const write =
        (method: RecordedCall['method']) => (path: string, body: Json, o: WriteOptions) => {
          if (!o?.idempotencyKey)
            throw new TypeError(`${method} to ${name} needs an idempotencyKey`);
          return record({ method, path, body, idempotencyKey: o.idempotencyKey });
        };
      return {
        name,
        get: (path) => record({ method: 'GET', path }),
        post: write('POST'),
        put: write('PUT'),
        patch: write('PATCH'),
        delete: (path, o) => {
          if (!o?.idempotencyKey) throw new TypeError(`DELETE to ${name} needs an idempotencyKey`);
          return record({ method: 'DELETE', path, idempotencyKey: o.idempotencyKey });
        },
      };
    },
  };
}
