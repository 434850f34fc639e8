import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire } from '../support/wires.ts';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ workers: 1, env: { DEMO_STEP_MS: '20' } });
});
afterAll(async () => {
  await stack?.close();
});

test('a dot-segment argument cannot walk out of the target path: the task ends with the tool error and nothing is written', async () => {
  const wire = jobToolsWire(stack.mcpUrl);
  const token = await stack.token('dora', 'acme');
  for (const collection of ['..', '.']) {
    const taskId = await wire.start(token, 'bulk_update_records', {
      collection,
      count: 10,
      patch: { a: 1 },
    });
    const done = await pollUntil(
      () => wire.get(token, taskId),
      (a) => a.ok && a.value.status !== 'working',
      20_000,
      50,
    );
    expect(done.ok && done.value).toMatchObject({ status: 'completed', outcome: 'tool_error' });
    const result = await wire.result(token, taskId);
    expect(JSON.stringify(result)).toContain("has a '.' or '..' segment");
    expect(await stack.writes(taskId)).toEqual([]);
    const [{ attempts }] = await sql(stack.db.url, 'SELECT attempts FROM app.tasks WHERE id = $1', [
      taskId,
    ]);
    expect(attempts).toBe(1); // refused, not retried
  }
  const landed = await sql(
    stack.db.url,
    `SELECT path FROM downstream.writes WHERE path = '/records'`,
  );
  expect(landed).toEqual([]);
});
