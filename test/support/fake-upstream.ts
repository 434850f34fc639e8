import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  isInitializeRequest,
  ListToolsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

export interface FakeTool {
  name: string;
  /** execution.taskSupport as listed (none: an instant tool). */
  taskSupport?: 'optional' | 'required';
}

/**
 * An upstream MCP server (the real v1 SDK, Streamable HTTP, sessions) whose tool list a test
 * sets: what a real server lists is its own choice, and the point here is listings the
 * gateway must refuse. It answers every call with the tool's name and records the call. It
 * checks no token (identity is proven against the demo upstream).
 */
export async function startFakeUpstream(initial: FakeTool[]) {
  let tools = initial;
  // holdNextListing: the next tools/list reads the tools, then waits for its release.
  let hold: { held: () => void; release: Promise<void> } | undefined;
  const calls: Array<{ tool: string; arguments: unknown }> = [];
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const servers = new Set<Server>();
  const newServer = () => {
    const server = new Server(
      { name: 'fake-upstream', version: '0.0.1' },
      { capabilities: { tools: { listChanged: true } } },
    );
    servers.add(server);
    server.onclose = () => servers.delete(server);
    server.setRequestHandler(ListToolsRequestSchema, async () => {
      const listed = tools.map((t) => ({
        name: t.name,
        description: `fake ${t.name}`,
        inputSchema: { type: 'object' as const, properties: {} },
        ...(t.taskSupport ? { execution: { taskSupport: t.taskSupport } } : {}),
      }));
      const h = hold;
      hold = undefined;
      if (h) {
        h.held();
        await h.release;
      }
      return { tools: listed };
    });
    server.setRequestHandler(CallToolRequestSchema, async (request) => {
      calls.push({ tool: request.params.name, arguments: request.params.arguments });
      return { content: [{ type: 'text', text: `called ${request.params.name}` }] };
    });
    return server;
  };
  const httpServer = http.createServer((req, res) => {
    let text = '';
    req.on('data', (c) => (text += c));
    req.on('end', () => {
      void (async () => {
        const body = text ? JSON.parse(text) : undefined;
        const id = req.headers['mcp-session-id'];
        let transport = typeof id === 'string' ? transports.get(id) : undefined;
        if (typeof id === 'string' && !transport) {
          res.writeHead(404).end();
          return;
        }
        if (!transport) {
          if (!isInitializeRequest(body)) {
            res.writeHead(400).end();
            return;
          }
          const t: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            onsessioninitialized: (sid: string) => {
              transports.set(sid, t);
            },
          });
          t.onclose = () => {
            if (t.sessionId) transports.delete(t.sessionId);
          };
          await newServer().connect(t);
          transport = t;
        }
        await transport.handleRequest(req, res, body);
      })().catch(() => {
        if (!res.headersSent) res.writeHead(500).end();
      });
    });
  });
  await new Promise<void>((r) => httpServer.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}/mcp`;
  return {
    url,
    calls,
    /** Lists these tools from now on, and tells every open session (tools/list_changed). */
    setTools(next: FakeTool[]) {
      tools = next;
      for (const s of servers) void s.sendToolListChanged().catch(() => {});
    },
    /**
     * The next tools/list reads the tools then waits: `held` resolves once it does, and it
     * answers what it read when `release` is called (a change made meanwhile comes after it).
     */
    holdNextListing() {
      let held!: () => void;
      let release!: () => void;
      const isHeld = new Promise<void>((r) => (held = r));
      hold = { held, release: new Promise<void>((r) => (release = r)) };
      return { held: isHeld, release };
    },
    async close() {
      for (const t of transports.values()) await t.close().catch(() => {});
      await new Promise<void>((r) => {
        httpServer.close(() => r());
        httpServer.closeAllConnections();
      });
    },
  };
}
