// A task's ending notifies `mtg_task_settled` only when someone waits for it: a blocking
// tasks/result asks for it (app.tasks.settle_watched) before it waits, and wakes on it; an
// ending nobody waits for wakes no listening session (every NOTIFY wakes every listening
// session of the database, the workers' too: docs/scaling.md).
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { listenSettled } from '../support/settled-listener.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { coreWire } from '../support/wires.ts';

let stack: Stack;
let settled: Awaited<ReturnType<typeof listenSettled>>;
beforeAll(async () => {
  stack = await startStack({ workers: 1 });
  settled = await listenSettled(stack.db.url);
});
afterAll(async () => {
  await settled?.close();
  await stack?.close();
});

const status = async (id: string) =>
  (await sql(stack.db.url, 'SELECT status, settle_watched FROM app.tasks WHERE id = $1', [id]))[0];

test('a blocking tasks/result watches the ending, which notifies; an ending nobody waits for notifies nobody', async () => {
  const token = await stack.token('watcher', 'acme');
  const wire = coreWire(stack.mcpUrl);
  const alone = await wire.start(token, 'generate_report', { report: 'alone', rows: 1 });
  await pollUntil(
    () => status(alone),
    (r) => r?.status === 'completed',
  );

  // No worker: the next two tasks stay working while a client blocks on one of them.
  for (const w of stack.workers) await w.stop();
  const awaited = await wire.start(token, 'generate_report', { report: 'awaited', rows: 1 });
  const polled = await wire.start(token, 'generate_report', { report: 'polled', rows: 1 });
  const client = await connectV1(stack.mcpUrl, token);
  const result = client.request(
    { method: 'tasks/result', params: { taskId: awaited } },
    CallToolResultSchema,
    { timeout: 60_000 },
  );
  await pollUntil(
    () => status(awaited),
    (r) => r?.settle_watched === true,
  );
  expect(await status(polled)).toEqual({ status: 'working', settle_watched: false });

  await stack.addWorker();
  expect(await result).toMatchObject({ content: expect.any(Array) });
  await pollUntil(
    () => status(polled),
    (r) => r?.status === 'completed',
  );
  await client.close();

  const notified = await settled.soFar();
  expect(notified).toContain(awaited);
  expect(notified).not.toContain(alone);
  expect(notified).not.toContain(polled);
}, 60_000);
