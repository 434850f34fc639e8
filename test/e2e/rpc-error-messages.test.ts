import {
  Client as V2Client,
  StreamableHTTPClientTransport as V2Transport,
} from '@modelcontextprotocol/client';
import {
  CancelTaskResultSchema,
  CreateTaskResultSchema,
  GetTaskResultSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { connectV1 } from '../support/clients.ts';
import { startStack, type Stack } from '../support/stack.ts';

// Each SDK client formats a JSON-RPC error itself (the v1 client's McpError prepends
// `MCP error <code>: `), so the wire must carry the bare message: one prefix, the client's.
let stack: Stack;
let token: string;
const missing = 'f'.repeat(32);

beforeAll(async () => {
  stack = await startStack({ workers: 0 });
  token = await stack.token('alice', 'acme');
});
afterAll(async () => {
  await stack?.close();
});

const refusal = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error('expected a JSON-RPC error');
    },
    (e: { code: number; message: string }) => ({ code: e.code, message: e.message }),
  );

test('2025-11-25: the v1 SDK client sees `MCP error -32602: Task not found`, one prefix, for every task verb', async () => {
  const client = await connectV1(stack.mcpUrl, token);
  try {
    for (const [method, schema] of [
      ['tasks/get', GetTaskResultSchema],
      ['tasks/result', GetTaskResultSchema],
      ['tasks/cancel', CancelTaskResultSchema],
    ] as const) {
      expect([
        method,
        await refusal(client.request({ method, params: { taskId: missing } }, schema)),
      ]).toEqual([method, { code: -32602, message: 'MCP error -32602: Task not found' }]);
    }
    // The gateway's own refusals of a call carry one prefix too.
    const ttl = await refusal(
      client.request(
        {
          method: 'tools/call',
          params: { name: 'generate_report', arguments: { report: 'x' }, task: { ttl: -1 } },
        },
        CreateTaskResultSchema,
      ),
    );
    expect(ttl.code).toBe(-32602);
    expect(ttl.message).toMatch(/^MCP error -32602: Invalid params: task\.ttl /);
    expect(ttl.message.match(/MCP error/g)).toHaveLength(1);
  } finally {
    await client.close();
  }
});

test('2026-07-28: the v2 SDK client (tasks extension declared) sees -32602 `Task not found`, which formats as `MCP error -32602: Task not found`', async () => {
  const client = new V2Client(
    { name: 'test-v2-tasks', version: '2.0.0' },
    {
      capabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } },
      versionNegotiation: { mode: { pin: '2026-07-28' } },
    },
  );
  await client.connect(
    new V2Transport(new URL(stack.mcpUrl), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  try {
    for (const method of ['tasks/get', 'tasks/cancel']) {
      const e = await refusal(
        client.request({ method, params: { taskId: missing } } as never, z.any() as never),
      );
      // The v2 SDK adds no prefix of its own: the bare message, as the wire carries it.
      expect([method, e]).toEqual([method, { code: -32602, message: 'Task not found' }]);
      expect(new McpError(e.code, e.message).message).toBe('MCP error -32602: Task not found');
    }
  } finally {
    await client.close();
  }
});
