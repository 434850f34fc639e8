import type { Clock } from '@mtg/clock';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import {
  CallToolRequestSchema,
  CancelTaskRequestSchema,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  InitializeRequestSchema,
  ListTasksRequestSchema,
  ListToolsRequestSchema,
  PingRequestSchema,
  type JSONRPCMessage,
} from '@modelcontextprotocol/sdk/types.js';
import { progressTokenOf, toView, type TaskError } from '@mtg/tasks';
import type { RequestContext } from '../http/request-context.ts';
import { callContextFrom, type Dispatch } from './dispatch.ts';
import { refuseInvalidParams } from './refuse-invalid-params.ts';
import { INSTRUCTIONS, SERVER_INFO } from './server-info.ts';
import { rpcErrorFor } from './task-errors.ts';
import { coreTask } from './task-shapes.ts';
import { answerTaskResult } from './task-result-answer.ts';
import { WireError } from './wire-error.ts';

export const WIRE_2025 = 'core-2025';
const WIRE = WIRE_2025;

/** Every request this server answers: the SDK's own (initialize, ping) and ours below. */
const SERVED_REQUESTS = [
  InitializeRequestSchema,
  PingRequestSchema,
  ListToolsRequestSchema,
  CallToolRequestSchema,
  GetTaskRequestSchema,
  GetTaskPayloadRequestSchema,
  ListTasksRequestSchema,
  CancelTaskRequestSchema,
];

/**
 * One JSON Schema validator for every per-request server: the SDK builds an Ajv instance (with
 * its formats) for each server it is not given one, a twentieth of a stateless request's CPU.
 * The SDK uses it only to check an answer to its own elicitInput, which no handler here
 * calls (questions go out through the transport: legacy-elicitation.ts).
 */
const SCHEMA_VALIDATOR = new AjvJsonSchemaValidator();

/** Answers params that fail their request schema with -32602, not the SDK's -32603. */
class LegacyServer extends Server {
  override async connect(transport: Transport): Promise<void> {
    await super.connect(transport);
    refuseInvalidParams(transport, SERVED_REQUESTS);
  }
}

/**
 * A fresh v1-SDK server for one 2025-era request (2025-11-25, 2025-06-18, 2025-03-26),
 * with the 2025-11-25 core tasks served from Postgres. The SDK's TaskStore is not used:
 * it never sees auth info and its cancel is not atomic (docs/architecture.md, "One endpoint, three eras"); these
 * handlers call the task service, which authorizes every verb.
 */
export function createLegacyServer(
  dispatch: Dispatch,
  request: RequestContext,
  options: { resultWaitMs: number; clock?: Clock },
): Server {
  const server = new LegacyServer(SERVER_INFO, {
    capabilities: {
      tools: {},
      tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
    },
    instructions: INSTRUCTIONS,
    jsonSchemaValidator: SCHEMA_VALIDATOR,
  });
  const fail = (e: TaskError): never => {
    const { code, message, data } = rpcErrorFor(e);
    throw new WireError(code, message, data);
  };

  server.setRequestHandler(ListToolsRequestSchema, (rpc) => {
    const page = dispatch.listToolsPage(request.principal, request.workload, rpc.params?.cursor);
    if (!page.ok) throw new WireError(-32602, page.message, { reason: page.code });
    return { tools: page.tools, ...(page.nextCursor ? { nextCursor: page.nextCursor } : {}) };
  });

  server.setRequestHandler(CallToolRequestSchema, async (rpc) => {
    const ctx = callContextFrom(request, rpc.params._meta, WIRE);
    const task = rpc.params.task;
    if (task?.ttl !== undefined && !(Number.isInteger(task.ttl) && task.ttl > 0)) {
      // Refused before any token exchange or row: the store keeps whole positive milliseconds.
      throw new WireError(
        -32602,
        'Invalid params: task.ttl must be a positive integer number of milliseconds',
      );
    }
    const progressToken = progressTokenOf(rpc.params._meta);
    const mode = task
      ? ({
          kind: 'core-task',
          ...(task.ttl ? { ttlMs: task.ttl } : {}),
          ...(progressToken !== undefined ? { progressToken } : {}),
        } as const)
      : ({ kind: 'plain' } as const);
    // Only a task-augmented call needs the listing (a plain one is answered either way).
    const listed = task
      ? dispatch
          .listTools(ctx.principal, ctx.workload)
          .tools.find((t) => t.name === rpc.params.name)
      : undefined;
    if (task && listed && !listed.execution) {
      // Spec: a tool that does not support tasks, asked to run as one.
      throw new WireError(-32601, `Tool ${rpc.params.name} does not support task-augmented calls`);
    }
    const outcome = await dispatch.callTool(rpc.params, mode, {
      ...ctx,
      wire: task ? WIRE : 'plain-2025',
    });
    if (outcome.kind === 'error') throw new WireError(outcome.code, outcome.message, outcome.data);
    if (outcome.kind === 'task') return { task: coreTask(toView(outcome.task)) };
    if (task && outcome.result.isError) {
      // A task-augmented call must answer CreateTaskResult or a JSON-RPC error; invalid
      // arguments (nothing was created) are the latter.
      const text = outcome.result.content.map((c) => c.text).join(' ');
      throw new WireError(-32602, text, outcome.result.structuredContent);
    }
    return outcome.result;
  });

  server.setRequestHandler(GetTaskRequestSchema, async (rpc) => {
    const r = await dispatch.tasks.get(
      rpc.params.taskId,
      callContextFrom(request, undefined, WIRE),
    );
    if (!r.ok) return fail(r);
    return coreTask(r.task);
  });

  server.setRequestHandler(GetTaskPayloadRequestSchema, async (rpc, extra) => {
    const answer = await answerTaskResult(dispatch, request, options, rpc.params.taskId, {
      progress: (notice) =>
        extra.sendNotification({ method: 'notifications/progress', params: notice }),
      ask: (message) =>
        server.transport!.send(message as JSONRPCMessage, { relatedRequestId: extra.requestId }),
    });
    if ('error' in answer) {
      const { code, message, data } = answer.error;
      throw new WireError(code, message, data);
    }
    return answer.result;
  });

  server.setRequestHandler(ListTasksRequestSchema, async (rpc) => {
    const r = await dispatch.tasks.list(callContextFrom(request, undefined, WIRE), {
      ...(rpc.params?.cursor ? { cursor: rpc.params.cursor } : {}),
    });
    if (!r.ok) return fail(r);
    return {
      tasks: r.tasks.map(coreTask),
      ...(r.nextCursor ? { nextCursor: r.nextCursor } : {}),
    };
  });

  server.setRequestHandler(CancelTaskRequestSchema, async (rpc) => {
    const r = await dispatch.tasks.cancel(
      rpc.params.taskId,
      callContextFrom(request, undefined, WIRE),
    );
    if (!r.ok) return fail(r);
    return coreTask(r.task);
  });

  return server;
}
