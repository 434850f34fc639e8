import { nowMs, type Clock } from '@mtg/clock';
import type { ProgressNotice } from '@mtg/tasks';
import type { RequestContext } from '../http/request-context.ts';
import { callContextFrom, type Dispatch } from './dispatch.ts';
import type { Obj } from './fast-wire.ts';
import { elicitationId } from './legacy-elicitation.ts';
import { rpcErrorFor } from './task-errors.ts';
import { elicitationOf } from './task-shapes.ts';

export const RELATED_TASK = 'io.modelcontextprotocol/related-task';

/** What goes out on a `tasks/result` stream before its answer. */
export interface ResultStream {
  /** The task's progress, sent with the token of the call that started it. */
  progress(notice: ProgressNotice): Promise<void>;
  /** A question of the task to its caller: a JSON-RPC request (legacy-elicitation.ts). */
  ask(message: Obj): Promise<void>;
}

/** A JSON-RPC answer's result or error (`{ code, message, data? }`). */
export type RpcAnswer =
  { result: Obj } | { error: { code: number; message: string; data?: unknown } };

const error = (code: number, message: string, data?: unknown): RpcAnswer => ({
  error: { code, message, ...(data !== undefined ? { data } : {}) },
});

/**
 * The 2025-11-25 `tasks/result`: waits (up to `resultWaitMs`) for the task to end and answers
 * its result, or its failure as an error. Meanwhile the task's progress and its questions to
 * its caller go out on the request's stream (the spec's way for 2025-11-25 tasks); the client's
 * elicitation handler answers a question in a POST of its own (legacy-elicitation.ts), and the
 * wait goes on, for the result or the next question. One answer for the SDK's server
 * (legacy-server.ts) and the gateway's own stream (fast-tasks-result.ts).
 */
export async function answerTaskResult(
  dispatch: Dispatch,
  request: RequestContext,
  options: { resultWaitMs: number; clock?: Clock },
  taskId: string,
  stream: ResultStream,
): Promise<RpcAnswer> {
  const until = nowMs(options.clock) + options.resultWaitMs;
  const asked: string[] = [];
  let r;
  for (;;) {
    r = await dispatch.tasks.awaitResult(
      taskId,
      callContextFrom(request, undefined, 'core-2025'),
      Math.max(0, until - nowMs(options.clock)),
      // The progress token of the call that started the task is valid for the task's
      // lifetime (2025-11-25 tasks): its progress goes out on this stream as it advances.
      { untilInput: true, asked, onProgress: (notice) => stream.progress(notice) },
    );
    if (!r.ok || !r.input) break;
    asked.push(r.input.key);
    await stream.ask({
      jsonrpc: '2.0',
      id: elicitationId(taskId, r.input.key),
      ...elicitationOf(r.input, taskId),
    });
  }
  if (!r.ok) {
    if (r.code === 'result_not_ready')
      return error(
        -32603,
        `Task ${taskId} still running after ${options.resultWaitMs} ms; call tasks/result again`,
      );
    const { code, message, data } = rpcErrorFor(r);
    return error(code, message, data);
  }
  if (r.input)
    return error(
      -32603,
      `Task ${taskId} still waits for your answer after ${options.resultWaitMs} ms; call tasks/result again to be asked again`,
    );
  if (r.result) {
    const stored = r.result.result;
    return {
      result: {
        ...stored,
        _meta: { ...((stored as { _meta?: object })._meta ?? {}), [RELATED_TASK]: { taskId } },
      },
    };
  }
  return error(-32603, `Task ${r.task.status}: ${r.task.statusMessage ?? r.task.outcome ?? ''}`, {
    status: r.task.status,
    outcome: r.task.outcome,
    [RELATED_TASK]: { taskId },
  });
}
