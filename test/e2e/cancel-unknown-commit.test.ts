// A cancel whose commit outcome the gateway does not learn (its connection breaks after the
// COMMIT was sent, before the answer): the caller is told "unavailable, retry", and its
// retry of the same cancel gets the answer the first would have — the task cancelled — not
// a refusal for a task that is already cancelled, and writes no second
// `task.cancel_requested`. Both of the cancel's commits are cut: the request (the flag and
// its event) and the settlement (no live worker: the gateway settles it itself).
import pg from 'pg';
import { CancelTaskResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { verifyAuditTrail } from '@mtg/audit';
import { connectV1 } from '../support/clients.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';

let stack: Stack;
let proxy: TcpProxy;

beforeAll(async () => {
  // No worker: the tasks stay queued, and every cancel is the gateway's to settle.
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

async function cancelWithCut(statement: string) {
  // The 2025-11-25 wire: a cancel of a terminal task is refused there (-32602).
  const client = await connectV1(stack.mcpUrl, await stack.token('uma', 'acme'));
  try {
    const created = await client.request(
      {
        method: 'tools/call',
        params: {
          name: 'bulk_update_records',
          // Arguments of its own: the same start would be deduplicated to an earlier task.
          arguments: { collection: statement.replace(/\W+/g, '-'), count: 50, patch: { x: 1 } },
          task: {},
        },
      },
      CreateTaskResultSchema,
    );
    const taskId = created.task.taskId;
    const cancel = () =>
      client.request({ method: 'tasks/cancel', params: { taskId } }, CancelTaskResultSchema);
    const cut = proxy.cutAtCommitOf(statement);
    await expect(cancel()).rejects.toMatchObject({
      message: expect.stringMatching(/unavailable/i),
    });
    await cut;
    const stored = (
      await sql<{ status: string; requested: boolean }>(
        stack.db.url,
        'SELECT status, cancel_requested_at IS NOT NULL AS requested FROM app.tasks WHERE id = $1',
        [taskId],
      )
    )[0]!;
    const retried = await cancel();
    expect(retried).toMatchObject({ taskId, status: 'cancelled' });
    const events = await sql<{ type: string; n: number }>(
      stack.db.url,
      `SELECT type, count(*)::int AS n FROM audit.events
        WHERE task_id = $1 AND type LIKE 'task.cancel%' GROUP BY type ORDER BY type`,
      [taskId],
    );
    expect(events).toEqual([
      { type: 'task.cancel_requested', n: 1 },
      { type: 'task.cancelled', n: 1 },
    ]);
    const owner = new pg.Client({ connectionString: stack.db.url });
    await owner.connect();
    try {
      expect(await verifyAuditTrail(owner)).toMatchObject({ ok: true });
    } finally {
      await owner.end();
    }
    return stored;
  } finally {
    await client.close();
  }
}

test('the request committed, its answer lost: the retry settles the task and writes no second task.cancel_requested', async () => {
  // The cut transaction committed the flag: the task waits, flagged, for its retry.
  expect(await cancelWithCut('cancel_requested_by = COALESCE')).toEqual({
    status: 'working',
    requested: true,
  });
});

test('the settlement committed, its answer lost: the retry answers the task cancelled instead of refusing it', async () => {
  expect(await cancelWithCut('ended_delegation AS')).toEqual({
    status: 'cancelled',
    requested: true,
  });
});
