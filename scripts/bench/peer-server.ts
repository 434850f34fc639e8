// The hand-built peer: what a team would put together from the official MCP TypeScript SDK
// (v1, stateless Streamable HTTP, MCP tasks on the 2025-11-25 wire) and DBOS Transact
// (durable workflows checkpointed in PostgreSQL). One long tool, bulk_update_records, runs as
// a DBOS workflow whose id is the task id; the TaskStore reads task state back from DBOS, so a
// restart loses nothing and DBOS recovers the workflows that were running. The caller
// (tenant/subject of a jose-verified bearer token) is the workflow's authenticated user and
// the task's owner. Deliberately nothing more: no audit trail, no token exchange, no
// downstream system, no rate limits or quotas, no idempotency keys.
// Env: PORT, DATABASE_URL (DBOS's system database), ISSUER, AUDIENCE, STEP_MS (default 100).
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { DBOS, type WorkflowStatus } from '@dbos-inc/dbos-sdk';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { TaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import {
  ErrorCode,
  McpError,
  type CallToolResult,
  type Task,
} from '@modelcontextprotocol/sdk/types.js';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import * as z from 'zod';

const env = process.env;
const STEP_MS = Number(env.STEP_MS ?? 100);
const BATCH = 500;
const POLL_MS = 1000;

interface BulkUpdate {
  collection: string;
  count: number;
  patch: Record<string, unknown>;
}

// One checkpointed step per batch of 500 records; each is the demo's "slow step".
const bulkUpdateRecords = DBOS.registerWorkflow(
  async (args: BulkUpdate) => {
    const batches = Math.ceil(args.count / BATCH);
    let updated = 0;
    for (let i = 0; i < batches; i++) {
      const step = await DBOS.runStep(
        async () => {
          await sleep(STEP_MS);
          return { batch: i, updated: Math.min(BATCH, args.count - i * BATCH) };
        },
        { name: 'updateBatch' },
      );
      updated += step.updated;
    }
    return { batches, updated, collection: args.collection };
  },
  { name: 'bulkUpdateRecords' },
);

const STATUS: Record<string, Task['status']> = {
  PENDING: 'working',
  ENQUEUED: 'working',
  SUCCESS: 'completed',
  ERROR: 'failed',
  MAX_RECOVERY_ATTEMPTS_EXCEEDED: 'failed',
  CANCELLED: 'cancelled',
};

function toTask(s: WorkflowStatus): Task {
  const status = STATUS[s.status] ?? 'working';
  return {
    taskId: s.workflowID,
    status,
    ttl: null,
    createdAt: new Date(s.createdAt).toISOString(),
    lastUpdatedAt: new Date(s.updatedAt ?? s.createdAt).toISOString(),
    pollInterval: POLL_MS,
    ...(status === 'failed' ? { statusMessage: String(s.error ?? s.status) } : {}),
  };
}

/** Task state is DBOS's workflow state, seen only by the workflow's authenticated user. */
function workflowTaskStore(owner: string): TaskStore {
  const find = async (id: string) => {
    const s = await DBOS.getWorkflowStatus(id);
    return s?.authenticatedUser === owner ? s : null;
  };
  return {
    // The id only: the workflow the tool starts under it is the durable record.
    async createTask() {
      const now = new Date().toISOString();
      const id = randomUUID();
      return {
        taskId: id,
        status: 'working',
        ttl: null,
        createdAt: now,
        lastUpdatedAt: now,
        pollInterval: POLL_MS,
      };
    },
    async getTask(id) {
      const s = await find(id);
      return s && toTask(s);
    },
    async storeTaskResult() {
      throw new Error('a workflow records its own result');
    },
    async getTaskResult(id): Promise<CallToolResult> {
      const s = await find(id);
      if (!s) throw new McpError(ErrorCode.InvalidParams, `Task not found: ${id}`);
      const task = toTask(s);
      if (task.status !== 'completed') {
        const text = task.statusMessage ?? `Task ${task.status}`;
        return { content: [{ type: 'text', text }], isError: true };
      }
      const r = s.output as Record<string, unknown>;
      return { content: [{ type: 'text', text: JSON.stringify(r) }], structuredContent: r };
    },
    async updateTaskStatus(id, status) {
      if (status === 'cancelled' && (await find(id))) await DBOS.cancelWorkflow(id);
    },
    async listTasks(cursor) {
      const offset = Number(cursor ?? 0);
      const page = await DBOS.listWorkflows({
        authenticatedUser: owner,
        limit: 100,
        offset,
        loadInput: false,
        loadOutput: false,
      });
      const next = page.length === 100 ? { nextCursor: String(offset + 100) } : {};
      return { tasks: page.map(toTask), ...next };
    },
  };
}

// The SDK's stateless pattern: a server and a transport per request.
function mcpServer(owner: string): McpServer {
  const server = new McpServer(
    { name: 'bench-peer', version: '1.0.0' },
    {
      capabilities: { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
      taskStore: workflowTaskStore(owner),
    },
  );
  server.experimental.tasks.registerToolTask(
    'bulk_update_records',
    {
      description: 'Apply a patch to `count` records of a collection, 500 records per step.',
      inputSchema: {
        collection: z.string(),
        count: z.number().int().min(1).max(100_000),
        patch: z.record(z.string(), z.unknown()),
      },
    },
    {
      async createTask(args, { taskStore }) {
        const task = await taskStore.createTask({});
        await DBOS.startWorkflow(bulkUpdateRecords, {
          workflowID: task.taskId,
          authenticatedUser: owner,
        })(args);
        return { task };
      },
      getTask: (_args, { taskId, taskStore }) => taskStore.getTask(taskId),
      getTaskResult: async (_args, { taskId, taskStore }) =>
        (await taskStore.getTaskResult(taskId)) as CallToolResult,
    },
  );
  return server;
}

const keys = createRemoteJWKSet(new URL(`${env.ISSUER}/jwks`));
async function ownerOf(auth = ''): Promise<string | null> {
  if (!auth.startsWith('Bearer ')) return null;
  try {
    const { payload } = await jwtVerify(auth.slice(7), keys, {
      issuer: env.ISSUER!,
      audience: env.AUDIENCE!,
    });
    return `${String(payload.tenant)}/${payload.sub}`;
  } catch {
    return null;
  }
}

DBOS.setConfig({
  name: 'bench-peer',
  systemDatabaseUrl: env.DATABASE_URL!,
  systemDatabasePoolSize: 20,
});
await DBOS.launch();

const app = createMcpExpressApp();
app.disable('x-powered-by');
app.post('/mcp', async (req, res) => {
  const owner = await ownerOf(req.headers.authorization);
  if (!owner) {
    res.status(401).json({ error: 'invalid_token' });
    return;
  }
  const server = mcpServer(owner);
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
  res.on('close', () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, req.body);
});
const server = app.listen(Number(env.PORT), '127.0.0.1', () =>
  process.send?.({ type: 'ready', service: 'peer' }),
);
process.on('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  void DBOS.shutdown().then(() => process.exit(0));
});
process.on('disconnect', () => process.exit(0));
