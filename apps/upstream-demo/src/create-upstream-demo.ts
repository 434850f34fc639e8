import { randomUUID } from 'node:crypto';
import express, { type Express } from 'express';
import { jwtVerify, type JWTVerifyGetKey } from 'jose';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  CancelTaskRequestSchema,
  ElicitResultSchema,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  isInitializeRequest,
  ListToolsRequestSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { createDemoTasks, demoToolList, type DemoAnswer, type DemoTask } from './demo-tasks.ts';
import { modernDemoHandler } from './modern-demo-server.ts';
import { requestClaimsOf, setRequestClaims } from './request-claims.ts';

/** One request the demo upstream accepted, as its debug endpoint shows it. */
export interface RecordedCall {
  method: string;
  tool?: string;
  taskId?: string;
  sub: string;
  act: unknown;
  aud: unknown;
  sessionId?: string;
  idempotencyKey?: string;
  at: string;
}

/** One MCP session the demo upstream opened, as GET /_sessions shows it. */
export interface RecordedSession {
  sessionId: string;
  /** Who opened it (the token of its initialize request). */
  sub: string;
  act: unknown;
  /** The opening token's `jti`: a session opened with a fresh token shows another one. */
  tokenId: unknown;
  openedAt: string;
  /** When the client ended it (DELETE); absent while open or when it was just dropped. */
  endedAt?: string;
}

export interface UpstreamDemoOptions {
  /** Its own resource URL: the audience its tokens must carry. */
  resource: string;
  /** The authorization server it trusts (a function when it is only known later). */
  issuer: string | (() => string);
  keys: JWTVerifyGetKey;
  /** Length of one stage of the slow tools. */
  stepMs: number;
  /**
   * The task wire it offers. `2025-11-25` (default): core tasks on its `initialize` sessions.
   * `2026-07-28`: the tasks extension on stateless 2026-07-28 requests (`server/discover`
   * advertises it); `initialize` sessions are still served, without task support.
   */
  tasksWire?: '2025-11-25' | '2026-07-28';
}

/**
 * A small MCP server the gateway can front, built with the MCP SDK (v1, 2025-11-25, sessions):
 * it verifies its own access tokens (issuer, audience = its resource: a token for the gateway
 * is refused), records `sub` and `act` of every request at GET /_calls (and every session
 * opened and ended at GET /_sessions), and offers
 * `build_artifact` (task-capable, four stages), `export_ledger` (no task support, progress
 * notifications), `approve_change` (a task that is input_required until POST /_approve
 * names its change) and `lookup_ticket` (instant). With `tasksWire: '2026-07-28'` its tasks
 * are served on the 2026-07-28 tasks extension instead (modern-demo-server.ts).
 */
export function createUpstreamDemo(options: UpstreamDemoOptions): {
  app: Express;
  calls: RecordedCall[];
  sessions: RecordedSession[];
  close(): void;
} {
  const calls: RecordedCall[] = [];
  const sessions: RecordedSession[] = [];
  const tasks = createDemoTasks(options.stepMs);
  const modern2026 = options.tasksWire === '2026-07-28';
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const app = express();
  app.disable('x-powered-by');

  app.get('/_calls', (_req, res) => {
    res.json(calls);
  });
  // Every session opened and ended: proves whether a client reuses its sessions.
  app.get('/_sessions', (_req, res) => {
    res.json(sessions);
  });
  // Approves a change: its approve_change task leaves input_required and goes on.
  app.post('/_approve', express.json(), (req, res) => {
    const change = (req.body as { change?: unknown } | undefined)?.change;
    if (typeof change !== 'string' || change === '' || change.length > 200) {
      res.status(400).json({ error: 'change: a non-empty string' });
      return;
    }
    res.json({ change, resumed: tasks.approve(change) });
  });
  // Adds an instant tool and tells every session (notifications/tools/list_changed).
  const extraTools: string[] = [];
  const servers = new Set<Server>();
  app.post('/_tools', express.json(), (req, res) => {
    const name = String((req.body as { name?: string }).name ?? '');
    if (!/^[a-z_]{1,32}$/.test(name)) {
      res.status(400).json({ error: 'name: a-z and _ only' });
      return;
    }
    if (!extraTools.includes(name)) extraTools.push(name);
    for (const s of servers) void s.sendToolListChanged().catch(() => {});
    res.status(204).end();
  });

  // Refuses (401) one token (`{"tokenId": jti}`), as an upstream that revoked it would, or
  // every token of a subject (`{"sub": …}`). A development aid, like /_tools.
  const refused = new Set<string>();
  app.post('/_refuse', express.json(), (req, res) => {
    const body = req.body as { sub?: unknown; tokenId?: unknown };
    const key =
      typeof body.tokenId === 'string' && body.tokenId
        ? `jti:${body.tokenId}`
        : typeof body.sub === 'string' && body.sub
          ? `sub:${body.sub}`
          : undefined;
    if (!key) {
      res.status(400).json({ error: 'tokenId or sub: a string' });
      return;
    }
    refused.add(key);
    res.status(204).end();
  });

  const authenticate: express.RequestHandler = async (req, res, next) => {
    const header = req.headers.authorization ?? '';
    const token = header.startsWith('Bearer ') ? header.slice(7) : '';
    try {
      const { payload } = await jwtVerify(token, options.keys, {
        issuer: typeof options.issuer === 'string' ? options.issuer : options.issuer(),
        audience: options.resource,
      });
      if (refused.has(`jti:${String(payload.jti)}`) || refused.has(`sub:${String(payload.sub)}`)) {
        throw new Error('refused');
      }
      setRequestClaims(res, payload);
      next();
    } catch {
      res
        .status(401)
        .set('www-authenticate', 'Bearer error="invalid_token"')
        .json({ error: 'invalid_token' });
    }
  };

  const record = (
    claims: Record<string, unknown>,
    call: Omit<RecordedCall, 'sub' | 'act' | 'aud' | 'at'>,
  ) => {
    calls.push({
      ...call,
      sub: String(claims.sub),
      act: claims.act ?? null,
      aud: claims.aud,
      at: new Date().toISOString(),
    });
  };

  const view = (t: DemoTask) => ({
    taskId: t.taskId,
    status: t.status,
    statusMessage: t.statusMessage,
    createdAt: t.createdAt,
    lastUpdatedAt: t.lastUpdatedAt,
    ttl: t.ttlMs,
    pollInterval: tasks.pollIntervalMs,
  });
  const modern = modern2026
    ? modernDemoHandler({ tasks, extraTools: () => extraTools, record })
    : undefined;

  const serveCoreTasks = (
    server: Server,
    claimsOf: () => Record<string, unknown>,
    sessionId: () => string | undefined,
  ) => {
    const find = (taskId: string) => {
      const t = tasks.find(taskId);
      if (!t) throw new McpError(-32602, 'Task not found');
      return t;
    };
    server.setRequestHandler(GetTaskRequestSchema, async (request) => {
      record(claimsOf(), {
        method: 'tasks/get',
        taskId: request.params.taskId,
        sessionId: sessionId(),
      });
      return view(find(request.params.taskId));
    });
    server.setRequestHandler(GetTaskPayloadRequestSchema, async (request, extra) => {
      record(claimsOf(), {
        method: 'tasks/result',
        taskId: request.params.taskId,
        sessionId: sessionId(),
      });
      const t = find(request.params.taskId);
      // Blocks until the task ends, as tasks/result does; a question the task asks meanwhile
      // goes to the client on this stream (again on each tasks/result while unanswered, so
      // a client that lost the stream is asked again), and its answer comes as a response.
      const asked = new Set<string>();
      while (!t.result) {
        const q = t.question;
        if (q && !asked.has(q.key)) {
          asked.add(q.key);
          void extra
            .sendRequest(
              {
                method: 'elicitation/create',
                params: {
                  mode: 'form',
                  message: q.message,
                  requestedSchema: q.requestedSchema,
                  _meta: { 'io.modelcontextprotocol/related-task': { taskId: t.taskId } },
                } as never,
              },
              ElicitResultSchema,
              { timeout: t.ttlMs },
            )
            .then((a) => tasks.answer(t, q.key, a as DemoAnswer))
            .catch(() => {});
        }
        if (extra.signal.aborted) throw new McpError(-32800, 'cancelled');
        await tasks.changed(extra.signal);
      }
      if (!t.result) throw new McpError(-32602, `Task ${t.status}`);
      return {
        ...t.result,
        _meta: { 'io.modelcontextprotocol/related-task': { taskId: t.taskId } },
      };
    });
    server.setRequestHandler(CancelTaskRequestSchema, async (request) => {
      record(claimsOf(), {
        method: 'tasks/cancel',
        taskId: request.params.taskId,
        sessionId: sessionId(),
      });
      const t = find(request.params.taskId);
      if (!tasks.cancel(t)) throw new McpError(-32602, `Task already ${t.status}`);
      return view(t);
    });
  };

  const newServer = (
    claimsOf: () => Record<string, unknown>,
    sessionId: () => string | undefined,
  ) => {
    const server = new Server(
      { name: 'upstream-demo', version: '0.1.0' },
      {
        capabilities: {
          tools: { listChanged: true },
          // On the 2026-07-28 demo, tasks are offered on that wire only.
          ...(modern2026 ? {} : { tasks: { cancel: {}, requests: { tools: { call: {} } } } }),
        },
      },
    );
    servers.add(server);
    server.onclose = () => servers.delete(server);
    server.setRequestHandler(ListToolsRequestSchema, async () => {
      record(claimsOf(), { method: 'tools/list', sessionId: sessionId() });
      return { tools: demoToolList(extraTools) };
    });
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const { name, arguments: args = {} } = request.params;
      const meta = request.params._meta;
      const key = meta?.['io.mcp-task-gateway/idempotency-key'];
      const taskParam = (request.params as { task?: { ttl?: number } }).task;
      record(claimsOf(), {
        method: 'tools/call',
        tool: name,
        sessionId: sessionId(),
        ...(typeof key === 'string' ? { idempotencyKey: key } : {}),
      });
      if (extraTools.includes(name)) {
        return {
          content: [{ type: 'text', text: String((args.text as string | undefined) ?? '') }],
        };
      }
      if (name === 'lookup_ticket') {
        if (args.id === 'missing') {
          // The tool's own error, as a tool result (not a protocol error).
          return { isError: true, content: [{ type: 'text', text: 'ticket missing: not found' }] };
        }
        return {
          content: [{ type: 'text', text: `ticket ${String(args.id)}: open` }],
          structuredContent: { id: String(args.id), state: 'open', sub: String(claimsOf().sub) },
        };
      }
      const task = taskParam ? tasks.start(name, args, taskParam.ttl ?? 600_000) : undefined;
      if (task) return { task: view(task) };
      if (name === 'export_ledger' && args.ledger === 'missing') {
        return { isError: true, content: [{ type: 'text', text: 'ledger missing: not found' }] };
      }
      if (name === 'export_ledger' || name === 'build_artifact') {
        const token = request.params._meta?.progressToken;
        for (let i = 1; i <= 4; i++) {
          await new Promise((r) => setTimeout(r, options.stepMs));
          if (extra.signal.aborted) throw new McpError(-32800, 'cancelled');
          if (token !== undefined) {
            await extra.sendNotification({
              method: 'notifications/progress',
              params: { progressToken: token, progress: i, total: 4, message: `part ${i} of 4` },
            });
          }
        }
        return {
          content: [{ type: 'text', text: `exported ${String(args.ledger ?? args.project)}` }],
          structuredContent: { rows: 4 },
        };
      }
      throw new McpError(-32602, `Unknown tool: ${name}`);
    });
    // Core tasks only where this era offers them.
    if (!modern2026) serveCoreTasks(server, claimsOf, sessionId);
    return server;
  };

  app.all('/mcp', express.json({ limit: '1mb' }), authenticate, async (req, res) => {
    if (modern && (await modern.handles(req))) {
      await modern.handle(req, res);
      return;
    }
    const sessionHeader = req.headers['mcp-session-id'];
    const existing = typeof sessionHeader === 'string' ? transports.get(sessionHeader) : undefined;
    if (typeof sessionHeader === 'string' && !existing) {
      res
        .status(404)
        .json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
      return;
    }
    let transport = existing;
    if (!transport && !isInitializeRequest(req.body)) {
      // A session starts with initialize (a 2026-07-28 probe such as server/discover lands
      // here on the 2025-11-25 demo): refused before any server is made for it.
      res.status(400).json({
        jsonrpc: '2.0',
        error: { code: -32600, message: 'Bad Request: no session; send initialize first' },
        id: null,
      });
      return;
    }
    if (!transport) {
      // Claims are per request: a session's later requests carry later tokens.
      const holder: { claims: Record<string, unknown> } = { claims: requestClaimsOf(res) };
      const t = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          transports.set(id, t);
          sessionClaims.set(id, holder);
          sessions.push({
            sessionId: id,
            sub: String(holder.claims.sub),
            act: holder.claims.act ?? null,
            tokenId: holder.claims.jti ?? null,
            openedAt: new Date().toISOString(),
          });
        },
      });
      t.onclose = () => {
        if (t.sessionId) transports.delete(t.sessionId);
      };
      await newServer(
        () => holder.claims,
        () => t.sessionId,
      ).connect(t);
      transport = t;
    } else {
      sessionClaims.get(sessionHeader as string)!.claims = requestClaimsOf(res);
      if (req.method === 'DELETE') {
        const s = sessions.find((x) => x.sessionId === sessionHeader);
        if (s) s.endedAt = new Date().toISOString();
      }
    }
    await transport.handleRequest(req, res, req.body);
  });
  const sessionClaims = new Map<string, { claims: Record<string, unknown> }>();

  return {
    app,
    calls,
    sessions,
    close() {
      tasks.close();
      for (const t of transports.values()) void t.close();
    },
  };
}
