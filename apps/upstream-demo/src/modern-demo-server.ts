import type { Request, Response } from 'express';
import {
  createMcpHandler,
  isLegacyRequest,
  ProtocolError,
  Server,
  type AuthInfo,
} from '@modelcontextprotocol/server';
import { toNodeHandler, toWebRequest } from '@modelcontextprotocol/node';
import { z } from 'zod';
import type { RecordedCall } from './create-upstream-demo.ts';
import { demoToolList, type DemoAnswer, type DemoTask, type DemoTasks } from './demo-tasks.ts';
import { requestClaimsOf } from './request-claims.ts';

const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
const CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
const taskIdParams = z.object({ taskId: z.string() }).passthrough();

type Claims = Record<string, unknown>;
type Ctx = { mcpReq: { envelope?: Record<string, unknown> } };

/** The verified claims of one request, handed to the v2 SDK as its authInfo. */
class DemoAuth implements AuthInfo {
  readonly token = '';
  readonly clientId: string;
  readonly scopes: string[] = [];
  readonly claims: Claims;
  constructor(claims: Claims) {
    this.claims = claims;
    const id = claims.client_id ?? claims.azp;
    this.clientId = typeof id === 'string' ? id : '';
  }
}

/**
 * The demo's 2026-07-28 side (v2 SDK, stateless): `server/discover` advertises the tasks
 * extension; a tools/call of a task tool from a client that declares it answers a
 * CreateTaskResult, `tasks/get` the DetailedTask with the result inline, `tasks/cancel` and
 * `tasks/update` are accepted. The SDK has no server side for the extension, so these are
 * custom handlers, as the gateway's own (apps/gateway/src/mcp/modern-server.ts).
 */
export function modernDemoHandler(o: {
  tasks: DemoTasks;
  extraTools: () => readonly string[];
  record: (claims: Claims, call: Omit<RecordedCall, 'sub' | 'act' | 'aud' | 'at'>) => void;
}) {
  const detailed = (t: DemoTask) => ({
    resultType: 'complete',
    taskId: t.taskId,
    status: t.status,
    statusMessage: t.statusMessage,
    createdAt: t.createdAt,
    lastUpdatedAt: t.lastUpdatedAt,
    ttlMs: t.ttlMs,
    pollIntervalMs: o.tasks.pollIntervalMs,
    ...(t.status === 'completed' && t.result
      ? { result: { resultType: 'complete', ...t.result } }
      : {}),
    ...(t.status === 'input_required'
      ? {
          inputRequests: t.question
            ? {
                [t.question.key]: {
                  method: 'elicitation/create',
                  params: {
                    mode: 'form',
                    message: t.question.message,
                    requestedSchema: t.question.requestedSchema,
                  },
                },
              }
            : {},
        }
      : {}),
  });
  const find = (taskId: string) => {
    const t = o.tasks.find(taskId);
    if (!t) throw new ProtocolError(-32602, 'Task not found');
    return t;
  };

  const serverFor = (claims: Claims) => {
    const server = new Server(
      { name: 'upstream-demo', version: '0.1.0' },
      { capabilities: { tools: {}, extensions: { [TASKS_EXTENSION]: {} } } },
    );
    const optedIn = (ctx: Ctx) => {
      const caps = ctx.mcpReq.envelope?.[CLIENT_CAPABILITIES] as
        { extensions?: Record<string, unknown> } | undefined;
      return caps?.extensions?.[TASKS_EXTENSION] !== undefined;
    };
    server.setRequestHandler('tools/list', () => {
      o.record(claims, { method: 'tools/list' });
      return { tools: demoToolList(o.extraTools()) } as never;
    });
    server.setRequestHandler('tools/call', async (rpc, ctx) => {
      const { name, arguments: args = {} } = rpc.params as {
        name: string;
        arguments?: Record<string, unknown>;
        _meta?: Record<string, unknown>;
      };
      const key = (rpc.params as { _meta?: Record<string, unknown> })._meta?.[
        'io.mcp-task-gateway/idempotency-key'
      ];
      o.record(claims, {
        method: 'tools/call',
        tool: name,
        ...(typeof key === 'string' ? { idempotencyKey: key } : {}),
      });
      if (name === 'lookup_ticket') {
        return {
          content: [{ type: 'text', text: `ticket ${String(args.id)}: open` }],
          structuredContent: { id: String(args.id), state: 'open', sub: String(claims.sub) },
        } as never;
      }
      if (!optedIn(ctx)) {
        throw new ProtocolError(-32602, `${name} runs as a task: declare ${TASKS_EXTENSION}`);
      }
      const t = o.tasks.start(name, args, 600_000);
      if (!t) throw new ProtocolError(-32602, `Unknown tool: ${name}`);
      const { result: _r, inputRequests: _i, ...task } = detailed(t) as Record<string, unknown>;
      return { ...task, resultType: 'task' } as never;
    });
    server.setRequestHandler('tasks/get', { params: taskIdParams }, async (params) => {
      o.record(claims, { method: 'tasks/get', taskId: params.taskId });
      return detailed(find(params.taskId));
    });
    server.setRequestHandler('tasks/update', { params: taskIdParams }, async (params, ctx) => {
      o.record(claims, { method: 'tasks/update', taskId: params.taskId });
      const t = find(params.taskId);
      // The SDK lifts the reserved `inputResponses` out of params onto the request context.
      const responses = (ctx as unknown as { mcpReq: { inputResponses?: Record<string, unknown> } })
        .mcpReq.inputResponses;
      for (const [key, answer] of Object.entries(responses ?? {})) {
        o.tasks.answer(t, key, answer as DemoAnswer);
      }
      return { resultType: 'complete' };
    });
    server.setRequestHandler('tasks/cancel', { params: taskIdParams }, async (params) => {
      o.record(claims, { method: 'tasks/cancel', taskId: params.taskId });
      const t = find(params.taskId);
      if (!o.tasks.cancel(t)) throw new ProtocolError(-32602, `Task already ${t.status}`);
      return { resultType: 'complete' };
    });
    return server;
  };

  const handler = toNodeHandler(
    createMcpHandler((f) => serverFor((f.authInfo as DemoAuth).claims), {
      legacy: 'reject',
      responseMode: 'auto',
    }),
  );
  return {
    /** A 2026-07-28 request (not `initialize`-era): served here. */
    async handles(req: Request): Promise<boolean> {
      if (req.method !== 'POST') return false;
      return !(await isLegacyRequest(await toWebRequest(req as never, req.body), req.body));
    },
    async handle(req: Request, res: Response) {
      (req as Request & { auth?: AuthInfo }).auth = new DemoAuth(requestClaimsOf(res));
      await handler(req as never, res as never, req.body);
    },
  };
}
