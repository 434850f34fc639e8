// A connection that breaks during its commit leaves the gateway not knowing whether the start
// happened. The client is told "unavailable, retry" (never a 500, never a task id it cannot
// trust), and its retry of the same start returns the task that did commit: one task, one
// task.created. A start is one statement, committed on its own (create-task.ts): the relay
// between the gateway and PostgreSQL lets that statement through and cuts the gateway's side
// before the answer.
import { rpc2026 } from '../support/raw-2026.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';

let stack: Stack;
let proxy: TcpProxy;

beforeAll(async () => {
  stack = await startStack({ workers: 0 });
  const db = new URL(stack.db.url);
  proxy = await startTcpProxy({ host: db.hostname, port: Number(db.port || 5432) });
  stack.env.DATABASE_URL = proxy.via(stack.env.DATABASE_URL!);
  await stack.restartGateway();
});
afterAll(async () => {
  await stack?.close();
  await proxy?.close();
});

test('a start whose commit outcome is unknown: answered unavailable, and the retry returns the one task that committed', async () => {
  const token = await stack.token('uma', 'acme');
  const start = () =>
    rpc2026(
      stack.mcpUrl,
      token,
      'tools/call',
      { name: 'generate_report', arguments: { report: 'commit-cut' } },
      { tasksExtension: true },
    );
  const warm = await rpc2026(
    stack.mcpUrl,
    token,
    'tools/call',
    { name: 'generate_report', arguments: { report: 'warm-up' } },
    { tasksExtension: true },
  );
  expect(warm.body.result?.taskId).toEqual(expect.any(String));

  const cut = proxy.cutAtCommitOf('app.start_admission');
  const first = await start();
  await cut;
  // Not a success the client could act on, and not an internal error: retry.
  expect({
    status: first.status,
    reason: first.body?.error?.data?.reason,
    taskId: first.body?.result?.taskId,
  }).toEqual({
    status: first.status === 503 ? 503 : 200,
    reason: 'unavailable',
    taskId: undefined,
  });
  // The transaction did commit: the task exists.
  const rows = await sql<{ id: string }>(
    stack.db.url,
    `SELECT id FROM app.tasks WHERE tool = 'generate_report' AND arguments ->> 'report' = 'commit-cut'`,
  );
  expect(rows).toHaveLength(1);
  // The client's retry of the same start is that task, not a second one.
  const retry = await start();
  expect(retry.body.result?.taskId).toBe(rows[0]!.id);
  const created = await sql<{ n: number }>(
    stack.db.url,
    `SELECT count(*)::int AS n FROM audit.events WHERE task_id = $1 AND type = 'task.created'`,
    [rows[0]!.id],
  );
  expect(created[0]!.n).toBe(1);
  expect(
    (
      await sql<{ n: number }>(
        stack.db.url,
        `SELECT count(*)::int AS n FROM app.tasks WHERE arguments ->> 'report' = 'commit-cut'`,
      )
    )[0]!.n,
  ).toBe(1);
});
