import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  GetTaskResultSchema,
  ListTasksResultSchema,
  CancelTaskResultSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { connectV1 } from '../support/clients.ts';
import { startStack, type Stack } from '../support/stack.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ workers: 1 });
});
afterAll(async () => {
  await stack?.close();
});

test('2025-11-25: long tools advertise taskSupport; tools/call with task returns CreateTaskResult; tasks/result blocks and returns the tool result', async () => {
  const client = await connectV1(stack.mcpUrl, await stack.token('alice', 'acme'));
  const { tools } = await client.listTools();
  expect(tools.find((t) => t.name === 'generate_report')?.execution?.taskSupport).toBe('optional');
  expect(tools.find((t) => t.name === 'whoami')?.execution).toBeUndefined();

  const created = await client.request(
    {
      method: 'tools/call',
      params: {
        name: 'generate_report',
        arguments: { report: 'r1', rows: 5 },
        task: { ttl: 60_000 },
      },
    },
    CreateTaskResultSchema,
  );
  const taskId = created.task.taskId;
  expect(created.task.status).toBe('working');
  expect(created.task.ttl).toBeLessThanOrEqual(60_000);

  const got = await client.request(
    { method: 'tasks/get', params: { taskId } },
    GetTaskResultSchema,
  );
  expect(got.taskId).toBe(taskId);

  const result = await client.request(
    { method: 'tasks/result', params: { taskId } },
    CallToolResultSchema,
  );
  expect(result.structuredContent).toMatchObject({ report: 'r1', rows: 5 });
  expect(result._meta?.['io.modelcontextprotocol/related-task']).toEqual({ taskId });

  const list = await client.request({ method: 'tasks/list', params: {} }, ListTasksResultSchema);
  expect(list.tasks.map((t) => t.taskId)).toContain(taskId);

  // Terminal tasks cannot be cancelled: -32602.
  await expect(
    client.request({ method: 'tasks/cancel', params: { taskId } }, CancelTaskResultSchema),
  ).rejects.toMatchObject({ code: -32602 });
  await client.close();
});

test('2025-11-25: tasks/cancel of a running task returns it cancelled', async () => {
  const client = await connectV1(stack.mcpUrl, await stack.token('alice', 'acme'));
  const created = await client.request(
    {
      method: 'tools/call',
      params: {
        name: 'bulk_update_records',
        arguments: { collection: 'c', count: 5000, patch: { x: 1 } },
        task: {},
      },
    },
    CreateTaskResultSchema,
  );
  const cancelled = await client.request(
    { method: 'tasks/cancel', params: { taskId: created.task.taskId } },
    CancelTaskResultSchema,
  );
  expect(cancelled.status).toBe('cancelled');
  await client.close();
});

test('2025-11-25: asking for a task on a tool without task support is -32601', async () => {
  const client = await connectV1(stack.mcpUrl, await stack.token('alice', 'acme'));
  await expect(
    client.request(
      { method: 'tools/call', params: { name: 'whoami', arguments: {}, task: {} } },
      CreateTaskResultSchema,
    ),
  ).rejects.toBeInstanceOf(McpError);
  await client.close();
});
