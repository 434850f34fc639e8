import {
  MissingRequiredClientCapabilityError,
  ProtocolError,
  Server,
} from '@modelcontextprotocol/server';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/server/validators/ajv';
import { z } from 'zod';
import { toView, type TaskError } from '@mtg/tasks';
import type { RequestContext } from '../http/request-context.ts';
import { callContextFrom, type Dispatch } from './dispatch.ts';
import { INSTRUCTIONS, SERVER_INFO } from './server-info.ts';
import { rpcErrorFor } from './task-errors.ts';
import { createdExtTask, detailedExtTask } from './task-shapes.ts';

export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
const CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
export const WIRE_2026 = 'ext-2026';
const WIRE = WIRE_2026;
// Built once: zod compiles a schema on first use, so one per request would recompile.
const taskIdParams = z.object({ taskId: z.string() }).passthrough();

type Ctx = {
  mcpReq: {
    _meta?: Record<string, unknown>;
    envelope?: Record<string, unknown>;
    inputResponses?: Record<string, unknown>;
  };
};

/** Shared by every per-request server, as in legacy-server.ts (no handler here elicits). */
const SCHEMA_VALIDATOR = new AjvJsonSchemaValidator();

/**
 * A fresh v2-SDK server for one 2026-07-28 request (stateless: never reused), serving the
 * tasks extension from Postgres. The SDK has no server side for the extension, so its three
 * methods are custom handlers over the task service.
 */
export function createModernServer(dispatch: Dispatch, request: RequestContext): Server {
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: {}, extensions: { [TASKS_EXTENSION]: {} } },
    instructions: INSTRUCTIONS,
    jsonSchemaValidator: SCHEMA_VALIDATOR,
  });
  // The envelope keeps the reserved key names: io.modelcontextprotocol/clientCapabilities.
  const optedIn = (ctx: Ctx) => {
    const caps = ctx.mcpReq.envelope?.[CLIENT_CAPABILITIES] as
      { extensions?: Record<string, unknown> } | undefined;
    return caps?.extensions?.[TASKS_EXTENSION] !== undefined;
  };
  const requireExtension = (ctx: Ctx) => {
    if (!optedIn(ctx)) {
      throw new MissingRequiredClientCapabilityError(
        { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
        `tasks/* requires the ${TASKS_EXTENSION} extension in the request's client capabilities`,
      );
    }
  };
  const fail = (e: TaskError): never => {
    const { code, message, data } = rpcErrorFor(e);
    throw new ProtocolError(code, message, data);
  };

  server.setRequestHandler('tools/list', (rpc) => {
    const page = dispatch.listToolsPage(request.principal, request.workload, rpc.params?.cursor);
    if (!page.ok) throw new ProtocolError(-32602, page.message, { reason: page.code });
    return {
      tools: page.tools,
      ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}),
    } as never;
  });

  server.setRequestHandler('tools/call', async (rpc, ctx) => {
    const c = ctx as unknown as Ctx;
    const call = callContextFrom(request, c.mcpReq._meta, WIRE);
    const mode = optedIn(c) ? ({ kind: 'ext-task' } as const) : ({ kind: 'plain' } as const);
    const outcome = await dispatch.callTool(rpc.params, mode, {
      ...call,
      wire: optedIn(c) ? WIRE : 'plain-2026',
    });
    if (outcome.kind === 'error')
      throw new ProtocolError(outcome.code, outcome.message, outcome.data);
    // Only now, with the row committed, does the client learn the task exists.
    if (outcome.kind === 'task') return createdExtTask(toView(outcome.task)) as never;
    return outcome.result;
  });

  server.setRequestHandler('tasks/get', { params: taskIdParams }, async (params, ctx) => {
    const c = ctx as unknown as Ctx;
    requireExtension(c);
    const call = callContextFrom(request, undefined, WIRE);
    const r = await dispatch.tasks.read(params.taskId, call, { withResult: true });
    if (!r.ok) return fail(r);
    return detailedExtTask(r);
  });

  server.setRequestHandler('tasks/update', { params: taskIdParams }, async (params, ctx) => {
    const c = ctx as unknown as Ctx;
    requireExtension(c);
    const call = callContextFrom(request, undefined, WIRE);
    const r = await dispatch.tasks.get(params.taskId, call);
    if (!r.ok) return fail(r);
    // Each response answers the question of its key (ctx.ask); the service validates it and
    // refuses, with the reason, an answer that does not fit (the task keeps waiting). A task
    // that asks its caller nothing (a mirrored downstream, checkpoint mode) ignores them.
    // The SDK lifts the reserved `inputResponses` out of params onto the request context.
    const responses = Object.entries(c.mcpReq.inputResponses ?? {});
    if (r.task.inputFrom === 'caller' || responses.some(([key]) => key.startsWith('ask:'))) {
      for (const [key, response] of responses) {
        const a = await dispatch.tasks.answer(params.taskId, call, { key, response });
        if (!a.ok) return fail(a);
      }
    }
    return { resultType: 'complete' };
  });

  server.setRequestHandler('tasks/cancel', { params: taskIdParams }, async (params, ctx) => {
    const c = ctx as unknown as Ctx;
    requireExtension(c);
    const r = await dispatch.tasks.cancel(params.taskId, callContextFrom(request, undefined, WIRE));
    if (!r.ok && r.code !== 'task_terminal') return fail(r);
    return { resultType: 'complete' };
  });

  return server;
}
