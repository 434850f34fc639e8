import {
  CreateTaskResultV2Schema,
  GetTaskResultV2Schema,
} from '@modelcontextprotocol/ext-tasks/core/v2';
import { pollUntil } from '../support/poll.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { startStack, type Stack } from '../support/stack.ts';

let stack: Stack;
let token: string;
beforeAll(async () => {
  stack = await startStack({ workers: 1 });
  token = await stack.token('alice', 'acme');
});
afterAll(async () => {
  await stack?.close();
});

const report = { name: 'generate_report', arguments: { report: 'q3-sales', rows: 50 } };

test('2026-07-28: tools/call with the tasks extension returns a durable task, tasks/get inlines the result', async () => {
  const created = await rpc2026(stack.mcpUrl, token, 'tools/call', report, {
    tasksExtension: true,
  });
  expect(created.status).toBe(200);
  const task = CreateTaskResultV2Schema.parse(created.body.result);
  expect(task.resultType).toBe('task');
  expect(task.status).toBe('working');

  const done = await pollUntil(
    async () =>
      (
        await rpc2026(
          stack.mcpUrl,
          token,
          'tasks/get',
          { taskId: task.taskId },
          { tasksExtension: true },
        )
      ).body.result,
    (r) => r.status !== 'working',
  );
  const parsed = GetTaskResultV2Schema.parse(done);
  expect(parsed.status).toBe('completed');
  expect(done.result.resultType).toBe('complete');
  expect(done.result.structuredContent).toMatchObject({ report: 'q3-sales', rows: 50 });
});

test('2026-07-28: without the extension a long tool answers with a job handle, and tasks/* gets -32021', async () => {
  const plain = await rpc2026(stack.mcpUrl, token, 'tools/call', {
    ...report,
    arguments: { report: 'plain', rows: 1 },
  });
  expect(plain.body.result.structuredContent.jobId).toMatch(/^[0-9a-f]{32}$/);
  const refused = await rpc2026(stack.mcpUrl, token, 'tasks/get', {
    taskId: plain.body.result.structuredContent.jobId,
  });
  expect(refused.body.error.code).toBe(-32021);
});

test('2026-07-28: tasks/cancel acknowledges, the task ends cancelled, and tasks/update is accepted', async () => {
  const created = await rpc2026(
    stack.mcpUrl,
    token,
    'tools/call',
    {
      name: 'bulk_update_records',
      arguments: { collection: 'users', count: 5000, patch: { active: true } },
    },
    { tasksExtension: true },
  );
  const taskId = created.body.result.taskId;
  const update = await rpc2026(
    stack.mcpUrl,
    token,
    'tasks/update',
    { taskId, inputResponses: {} },
    { tasksExtension: true },
  );
  expect(update.body.result).toMatchObject({ resultType: 'complete' });
  const cancel = await rpc2026(
    stack.mcpUrl,
    token,
    'tasks/cancel',
    { taskId },
    { tasksExtension: true },
  );
  expect(cancel.body.result).toMatchObject({ resultType: 'complete' });
  const after = await rpc2026(
    stack.mcpUrl,
    token,
    'tasks/get',
    { taskId },
    { tasksExtension: true },
  );
  expect(after.body.result.status).toBe('cancelled');
});

test('2026-07-28: an unknown task id gets -32602', async () => {
  const r = await rpc2026(
    stack.mcpUrl,
    token,
    'tasks/get',
    { taskId: 'f'.repeat(32) },
    { tasksExtension: true },
  );
  expect(r.body.error.code).toBe(-32602);
});
