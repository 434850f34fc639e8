import type { Clock } from '@mtg/clock';
import type { Request, Response } from 'express';
import type { RequestContext } from '../http/request-context.ts';
import type { Dispatch } from './dispatch.ts';
import { coreStateless, isObj, progressTokenAlone, validId, type Obj } from './fast-wire.ts';
import { answerTaskResult } from './task-result-answer.ts';

/**
 * The taskId of a 2025-11-25 `tasks/result` as the v1 SDK's client sends it to a stateless
 * server (no session id, Accept listing JSON and SSE, a JSON body), or undefined, for the SDK
 * to answer as it would. Beside the taskId the params may hold what the client adds and the
 * SDK's server ignores for this request: `task` (callToolStream passes its call's options on,
 * and the request schema drops it) and a `_meta` of a progress token alone (the task's
 * progress goes with the token of the call that started it). Any other `_meta` (a related
 * task changes what the SDK sends) goes to the SDK.
 */
export function coreTasksResult(req: Request): { id: string | number; taskId: string } | undefined {
  const body: unknown = req.body;
  if (!isObj(body) || body.jsonrpc !== '2.0' || body.method !== 'tasks/result') return undefined;
  if (!validId(body.id)) return undefined;
  const params = body.params;
  if (!isObj(params) || typeof params.taskId !== 'string') return undefined;
  if (Object.keys(params).some((k) => k !== 'taskId' && k !== 'task' && k !== '_meta'))
    return undefined;
  if (params._meta !== undefined && !progressTokenAlone(params._meta)) return undefined;
  if (!coreStateless(req)) return undefined;
  return { id: body.id, taskId: params.taskId };
}

/** As the v1 SDK's transport answers a request on a stream of its own. */
const SSE_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
};
/** The v1 transport's keep-alive comment and its interval, for a long wait behind a proxy. */
const KEEP_ALIVE = ': keepalive\n\n';
const KEEP_ALIVE_MS = 15_000;

/**
 * The 2025-11-25 `tasks/result` without the SDK's per-request server and transport: the
 * result read of a task by the wire most clients speak, whose answer (an SSE stream, since
 * progress and questions may come first) costs the SDK a server, a transport and web
 * streams each time. The answer is the same (answerTaskResult, which the SDK's handler
 * calls too) and so is the stream, event for event: test/e2e/fast-tasks-get.test.ts compares
 * the two paths. Returns false, having done nothing, for any request it does not take.
 */
export function fastTasksResult(
  dispatch: Dispatch,
  options: { resultWaitMs: number; clock?: Clock },
) {
  return async (req: Request, res: Response, request: RequestContext): Promise<boolean> => {
    const call = coreTasksResult(req);
    if (!call) return false;
    res.writeHead(200, SSE_HEADERS);
    // A client that went away: what is still to send goes nowhere (as the SDK's stream).
    const open = () => !res.writableEnded && !res.destroyed;
    const send = (message: Obj) => {
      if (open()) res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
    };
    const keepAlive = setInterval(() => {
      if (open()) res.write(KEEP_ALIVE);
    }, KEEP_ALIVE_MS);
    keepAlive.unref();
    res.on('close', () => clearInterval(keepAlive));
    try {
      const answer = await answerTaskResult(dispatch, request, options, call.taskId, {
        progress: async (notice) =>
          send({ method: 'notifications/progress', params: notice, jsonrpc: '2.0' }),
        ask: async (message) => send(message),
      });
      send(
        'result' in answer
          ? { result: answer.result, jsonrpc: '2.0', id: call.id }
          : { jsonrpc: '2.0', id: call.id, error: answer.error },
      );
    } catch (error) {
      // The stream is open: the answer goes on it, as the SDK's would, without the error's
      // text (the guards have turned an outage into an answer already); the error itself
      // goes on to the last-resort handler, which logs it.
      send({ jsonrpc: '2.0', id: call.id, error: { code: -32603, message: 'Internal error' } });
      throw error;
    } finally {
      clearInterval(keepAlive);
      if (open()) res.end();
    }
    return true;
  };
}
