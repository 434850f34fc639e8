import type { Request, Response } from 'express';
import type { RequestContext } from '../http/request-context.ts';
import { callContextFrom, type Dispatch } from './dispatch.ts';
import { WIRE_2025 } from './legacy-server.ts';
import { WIRE_2026 } from './modern-server.ts';
import { SERVER_INFO } from './server-info.ts';
import { rpcErrorFor } from './task-errors.ts';
import { coreTask, detailedExtTask } from './task-shapes.ts';
import { fastJobStatus } from './fast-job-status.ts';
import { coreStateless, isObj, modernFraming, sendAnswer, validId, type Obj } from './fast-wire.ts';

/**
 * The taskId of a 2026-07-28 `tasks/get` that the v2 SDK would accept as it stands, or
 * undefined for anything else. Deliberately narrow: the request must be exactly what a
 * conforming client sends (envelope, MCP-Protocol-Version / Mcp-Method / Mcp-Name headers
 * agreeing with the body, the tasks extension declared), so that every request the SDK
 * would refuse or treat differently still goes to the SDK and gets the SDK's answer.
 */
export function plainTasksGet(req: Request): { id: string | number; taskId: string } | undefined {
  const body: unknown = req.body;
  if (!isObj(body) || body.jsonrpc !== '2.0' || body.method !== 'tasks/get') return undefined;
  const id = body.id;
  if (!(typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id))))
    return undefined;
  const params = body.params;
  if (!isObj(params) || typeof params.taskId !== 'string') return undefined;
  if (!modernFraming(req, params._meta, 'tasks/get', params.taskId)) return undefined;
  return { id, taskId: params.taskId };
}

/**
 * The taskId of a 2025-11-25 `tasks/get` exactly as the v1 SDK's client sends it after
 * `initialize` to a stateless server (no session id, no `_meta`, no 2026 headers), which the
 * v1 transport would take as it stands (Accept listing both JSON and SSE, a JSON body); or
 * undefined, for the SDK to answer as it would.
 */
export function coreTasksGet(req: Request): { id: string | number; taskId: string } | undefined {
  const body: unknown = req.body;
  if (!isObj(body) || body.jsonrpc !== '2.0' || body.method !== 'tasks/get') return undefined;
  if (!validId(body.id)) return undefined;
  const params = body.params;
  if (!isObj(params) || typeof params.taskId !== 'string' || Object.keys(params).length !== 1)
    return undefined;
  if (!coreStateless(req)) return undefined;
  return { id: body.id, taskId: params.taskId };
}

const send = (res: Response, id: string | number, outcome: { result: Obj } | { error: Obj }) =>
  sendAnswer(res, { id, ...outcome });

function errorOf(r: Parameters<typeof rpcErrorFor>[0]): Obj {
  const { code, message, data } = rpcErrorFor(r);
  return { code, message, ...(data !== undefined ? { data } : {}) };
}

/**
 * `tasks/get` on the 2026-07-28 wire without the SDK's per-request server: polling is the
 * hottest call a gateway of long tasks serves, and the same verb through the SDK costs a
 * server instance, web Request/Response objects and schema validation each time. The verb
 * itself is the same (`dispatch.tasks.read`, authorization, audit and rate limits included)
 * and so is the answer (`detailedExtTask`), byte for byte in content: test/e2e/fast-tasks-get.test.ts compares
 * the two paths. Returns false, having done nothing, for any request it does not take.
 */
export function fastTasksGet(dispatch: Dispatch) {
  return async (req: Request, res: Response, request: RequestContext): Promise<boolean> => {
    const call = plainTasksGet(req);
    if (call) {
      const ctx = callContextFrom(request, undefined, WIRE_2026);
      const r = await dispatch.tasks.read(call.taskId, ctx, { withResult: true });
      send(
        res,
        call.id,
        r.ok
          ? {
              result: {
                ...detailedExtTask(r),
                _meta: { 'io.modelcontextprotocol/serverInfo': SERVER_INFO },
              },
            }
          : { error: errorOf(r) },
      );
      return true;
    }
    const core = coreTasksGet(req);
    if (!core) {
      const job = await fastJobStatus(dispatch, req, request);
      if (job) sendAnswer(res, job);
      return job !== undefined;
    }
    // As legacy-server.ts answers it: the same verb, the same core Task shape.
    const r = await dispatch.tasks.get(core.taskId, callContextFrom(request, undefined, WIRE_2025));
    send(res, core.id, r.ok ? { result: coreTask(r.task) } : { error: errorOf(r) });
    return true;
  };
}
