import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { coreWire, extWire, jobToolsWire } from '../support/wires.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ workers: 1, env: { DEMO_STEP_MS: '20' } });
});
afterAll(async () => {
  await stack?.close();
});

test('a dot-segment argument cannot walk out of the target path: the task ends with the tool error and nothing is written', async () => {
  const token = await stack.token('dora', 'acme');
  for (const [wire, collection] of [
    [jobToolsWire(stack.mcpUrl), '..'],
    [coreWire(stack.mcpUrl), '.'],
    [extWire(stack.mcpUrl), '..'],
  ] as const) {
    const taskId = await wire.start(token, 'bulk_update_records', {
      collection,
      count: 10 + collection.length + (wire.name.length % 7),
      patch: { a: 1 },
    });
    const done = await pollUntil(
      () => wire.get(token, taskId),
      (a) => a.ok && a.value.status !== 'working',
      20_000,
      50,
    );
    expect(done.ok && done.value.status).toBe('completed');
    // The job tools' test wire keeps only the text of an error: read the whole result there.
    const result = wire.name.startsWith('job tools')
      ? await connectV1(stack.mcpUrl, token).then(async (c) => {
          try {
            return await c.callTool({ name: 'get_job_result', arguments: { jobId: taskId } });
          } finally {
            await c.close();
          }
        })
      : await wire.result(token, taskId);
    // The tool's error reaches the caller with its code, on every wire.
    expect(JSON.stringify(result)).toContain("has a '.' or '..' segment");
    expect(JSON.stringify(result)).toContain(
      '"io.mcp-task-gateway/tool-error":{"code":"invalid_target_path"}',
    );
    expect(await stack.writes(taskId)).toEqual([]);
    const [row] = await sql(stack.db.url, 'SELECT attempts, outcome FROM app.tasks WHERE id = $1', [
      taskId,
    ]);
    expect(row).toEqual({ attempts: 1, outcome: 'tool_error' }); // refused, not retried
  }
  const landed = await sql(
    stack.db.url,
    `SELECT path FROM downstream.writes WHERE path = '/records'`,
  );
  expect(landed).toEqual([]);
});
