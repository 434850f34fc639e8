// An answer or an approval whose commit outcome the gateway does not learn (its connection
// breaks after the COMMIT was sent, before the answer): the caller is told "unavailable,
// retry", and its retry of the same answer or decision gets what the first attempt would
// have — not "not waiting" or "not found" for a task its answer resumed — and writes no
// second event and no denial. The task then runs on once. Only the gateway reaches
// PostgreSQL through the relay.
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { verifyAuditTrail } from '@mtg/audit';
import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';
import { jobToolsWire } from '../support/wires.ts';

const PACK = fileURLToPath(new URL('../fixtures/packs/asks-caller.ts', import.meta.url));
// The statement of an answer's (and a decision's) transaction that journals it.
const JOURNAL_ANSWER = "'gateway', $4";

let stack: Stack;
let proxy: TcpProxy;

beforeAll(async () => {
  stack = await startStack({
    workers: 1,
    env: { TOOL_PACKS: `@mtg/demo-tools,${PACK}`, DEMO_APPROVAL_ABOVE: '100', DEMO_STEP_MS: '50' },
  });
  const db = new URL(stack.db.url);
  proxy = await startTcpProxy({ host: db.hostname, port: Number(db.port || 5432) });
  stack.env.DATABASE_URL = proxy.via(stack.env.DATABASE_URL!);
  await stack.restartGateway();
});
afterAll(async () => {
  await stack?.close();
  await proxy?.close();
});

const parked = (taskId: string) =>
  pollUntil(
    () => sql(stack.db.url, 'SELECT status, lease_owner FROM app.tasks WHERE id = $1', [taskId]),
    (r) => r[0]?.status === 'input_required' && r[0]?.lease_owner === null,
  );
const completed = (taskId: string) =>
  pollUntil(
    () => sql(stack.db.url, 'SELECT status FROM app.tasks WHERE id = $1', [taskId]),
    (r) => r[0]?.status === 'completed',
  );
const eventTypes = async (taskId: string) =>
  (
    await sql<{ type: string }>(
      stack.db.url,
      'SELECT type FROM audit.events WHERE task_id = $1 ORDER BY seq',
      [taskId],
    )
  ).map((e) => e.type);
async function verified() {
  const owner = new pg.Client({ connectionString: stack.db.url });
  await owner.connect();
  try {
    return await verifyAuditTrail(owner);
  } finally {
    await owner.end();
  }
}
async function callTool(token: string, name: string, args: Record<string, unknown>) {
  const c = await connectV1(stack.mcpUrl, token);
  try {
    return await c.callTool({ name, arguments: args });
  } finally {
    await c.close();
  }
}
const text = (r: object) => JSON.stringify((r as { content?: unknown }).content);

test('an answer whose commit outcome is unknown: the retry is answered as the first would have been, and the task runs on once', async () => {
  const alice = await stack.token('alice', 'acme');
  const jobId = await jobToolsWire(stack.mcpUrl).start(alice, 'confirm_change', { records: 7 });
  await parked(jobId);
  const answer = () => callTool(alice, 'answer_job', { jobId, response: { action: 'decline' } });
  const cut = proxy.cutAtCommitOf(JOURNAL_ANSWER);
  const first = await answer();
  await cut;
  expect(first.isError).toBe(true);
  expect(text(first)).toMatch(/unavailable/i);
  const retry = await answer();
  expect(retry.isError).toBeFalsy();
  await completed(jobId);
  const types = await eventTypes(jobId);
  expect(types.filter((t) => t === 'task.input_received')).toHaveLength(1);
  expect(types.filter((t) => t === 'task.denied')).toHaveLength(0);
  expect(types.filter((t) => t === 'task.completed')).toHaveLength(1);
  expect(await verified()).toMatchObject({ ok: true });
});

test('a decision whose commit outcome is unknown: the retry gets the approval, not a not-found, and nothing is written twice', async () => {
  const alice = await stack.token('alice', 'acme');
  const bob = await stack.token('bob', 'acme', { scope: 'records:write records:approve' });
  const taskId = await jobToolsWire(stack.mcpUrl).start(alice, 'bulk_update_records', {
    collection: 'commit-cut',
    count: 300,
    patch: { role: 'admin' },
  });
  await parked(taskId);
  const approve = () => callTool(bob, 'approve_task', { taskId });
  const cut = proxy.cutAtCommitOf(JOURNAL_ANSWER);
  const first = await approve();
  await cut;
  expect(first.isError).toBe(true);
  expect(text(first)).toMatch(/unavailable/i);
  const retry = await approve();
  expect(retry.isError).toBeFalsy();
  expect(retry.structuredContent).toMatchObject({ approval: { taskId, scope: 'records:approve' } });
  await completed(taskId);
  const types = await eventTypes(taskId);
  expect(types.filter((t) => t === 'task.approved')).toHaveLength(1);
  expect(types.filter((t) => t === 'task.denied')).toHaveLength(0);
  expect(types.filter((t) => t === 'task.completed')).toHaveLength(1);
  // A decision the approver did not make is still refused: rejecting now is not found.
  const reject = await callTool(bob, 'reject_task', { taskId, reason: 'changed my mind' });
  expect(reject.isError).toBe(true);
  expect(await verified()).toMatchObject({ ok: true });
});
