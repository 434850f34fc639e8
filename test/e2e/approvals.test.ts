import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  checkpointScript,
  runScript,
  verifyScript,
} from '../../packages/audit/test/support/run-script.ts';
import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { extWire, jobToolsWire } from '../support/wires.ts';

// Four-eyes approval of the demo's bulk_update_records above DEMO_APPROVAL_ABOVE, decided
// through the gateway's approval tools with real tokens from the dev IdP.
let stack: Stack;
let alice: string;
beforeAll(async () => {
  stack = await startStack({ workers: 1, env: { DEMO_APPROVAL_ABOVE: '100' } });
  alice = await stack.token('alice', 'acme');
});
afterAll(async () => {
  await stack?.close();
});

const APPROVER = 'records:write records:approve';
const tool = async (token: string, name: string, args: Record<string, unknown> = {}) => {
  const c = await connectV1(stack.mcpUrl, token);
  try {
    return await c.callTool({ name, arguments: args });
  } finally {
    await c.close();
  }
};
const start = async (count: number) => {
  const id = await extWire(stack.mcpUrl).start(alice, 'bulk_update_records', {
    collection: 'accounts',
    count,
    patch: { role: 'admin' },
  });
  await pollUntil(
    () => jobToolsWire(stack.mcpUrl).get(alice, id),
    (a) => a.ok && a.value.inputFrom === 'approver',
  );
  return id;
};
const finished = (id: string) =>
  pollUntil(
    () => jobToolsWire(stack.mcpUrl).get(alice, id),
    (a) => a.ok && a.value.status === 'completed',
  );

test('a second person holding records:approve sees the request and approves it; the task then writes', async () => {
  const id = await start(300);
  const status = await jobToolsWire(stack.mcpUrl).get(alice, id);
  expect(status).toMatchObject({
    ok: true,
    value: { status: 'input_required', approval: { scope: 'records:approve' } },
  });
  expect(await stack.writes(id)).toEqual([]);
  const bob = await stack.token('bob', 'acme', { scope: APPROVER });
  const listed = await tool(bob, 'list_approvals');
  expect((listed.structuredContent as { approvals: unknown[] }).approvals).toContainEqual(
    expect.objectContaining({
      taskId: id,
      tool: 'bulk_update_records',
      owner: { subject: 'alice', client: expect.any(String) },
      scope: 'records:approve',
      reason: expect.stringContaining('300 records of accounts'),
      arguments: { collection: 'accounts', count: 300, patchFields: ['role'] },
    }),
  );
  const approved = await tool(bob, 'approve_task', { taskId: id });
  expect(approved.isError).toBeFalsy();
  await finished(id);
  expect((await stack.writes(id)).length).toBeGreaterThan(0);
  const trail = await sql(
    stack.db.url,
    `SELECT type, actor_subject FROM audit.events WHERE task_id = $1 ORDER BY seq`,
    [id],
  );
  const types = trail.map((e) => e.type);
  expect(types.indexOf('task.approval_requested')).toBeLessThan(types.indexOf('task.approved'));
  expect(trail.find((e) => e.type === 'task.approved')?.actor_subject).toBe('bob');
});

test('the requester cannot approve their own task, through any client; others without the scope or tenant get not-found', async () => {
  const id = await start(200);
  const missing = 'e'.repeat(32);
  const own = await stack.token('alice', 'acme', { client: 'mcp-agent-2', scope: APPROVER });
  const self = await tool(own, 'approve_task', { taskId: id });
  expect(self.isError).toBe(true);
  expect(self.content).toEqual([
    { type: 'text', text: 'You requested this task: a different person must approve or reject it' },
  ]);
  const unscoped = await stack.token('bob', 'acme', { scope: 'records:write' });
  const foreign = await stack.token('carol', 'globex', { scope: APPROVER });
  for (const token of [unscoped, foreign]) {
    expect(await tool(token, 'approve_task', { taskId: id })).toEqual(
      await tool(token, 'approve_task', { taskId: missing }),
    );
    expect((await tool(token, 'reject_task', { taskId: id, reason: 'x' })).content).toEqual([
      { type: 'text', text: 'Task not found' },
    ]);
    expect(
      (
        (await tool(token, 'list_approvals')).structuredContent as {
          approvals: Array<{ taskId: string }>;
        }
      ).approvals.map((a) => a.taskId),
    ).not.toContain(id);
  }
  const denied = await sql(
    stack.db.url,
    `SELECT reason FROM audit.events WHERE type = 'task.denied' AND task_id = $1`,
    [id],
  );
  expect(denied.map((d) => d.reason)).toEqual(
    expect.arrayContaining(['self_approval', 'approver_scope_missing']),
  );
  // Still waiting: nobody decided it.
  expect((await jobToolsWire(stack.mcpUrl).get(alice, id)).ok).toBe(true);
  expect(await stack.writes(id)).toEqual([]);
});

test('a rejection ends the task with the approver’s reason and nothing is written', async () => {
  const id = await start(150);
  const bob = await stack.token('bob', 'acme', { scope: APPROVER });
  await tool(bob, 'reject_task', { taskId: id, reason: 'not during the audit freeze' });
  await finished(id);
  const result = await jobToolsWire(stack.mcpUrl).result(alice, id);
  expect(result).toMatchObject({
    ok: false,
    error: expect.stringContaining('Rejected by bob: not during the audit freeze'),
  });
  expect(await stack.writes(id)).toEqual([]);
});

test('the evidence bundle of an approved and of a rejected task holds the request and the decision, naming the approver', async () => {
  const approved = await start(120);
  const rejected = await start(130);
  const bob = await stack.token('bob', 'acme', { scope: APPROVER });
  expect((await tool(bob, 'approve_task', { taskId: approved })).isError).toBeFalsy();
  expect(
    (await tool(bob, 'reject_task', { taskId: rejected, reason: 'wrong collection' })).isError,
  ).toBeFalsy();
  await finished(approved);
  await finished(rejected);

  // As an auditor exports and checks them: `npm run -s audit -- bundle --task`, a signed
  // checkpoint, `npm run -s audit:verify -- --bundle`.
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-approval-bundle-'));
  try {
    const env = { DATABASE_URL: stack.db.url, DATA_DIR: path.join(dir, 'data') };
    expect((await checkpointScript([], env)).code).toBe(0);
    const bundleOf = async (taskId: string) => {
      const file = path.join(dir, `${taskId}.json`);
      const made = await runScript(
        'scripts/audit.ts',
        ['bundle', '--task', taskId, '--tenant', 'acme', '--out', file],
        env,
      );
      expect(made.code).toBe(0);
      const verified = await verifyScript(
        ['--bundle', file, '--keys', path.join(dir, 'data', 'audit', 'jwks.json')],
        { DATA_DIR: path.join(dir, 'nothing') },
      );
      expect(verified.code).toBe(0);
      const bundle = JSON.parse(await readFile(file, 'utf8')) as {
        events: Array<{ type?: string; body?: string; selected?: boolean }>;
      };
      return bundle.events
        .filter(
          (e) => e.selected && /^task\.(approval_requested|approved|rejected)$/.test(e.type ?? ''),
        )
        .map((e) => ({ type: e.type, ...(JSON.parse(e.body!) as Record<string, any>) }));
    };
    const yes = await bundleOf(approved);
    expect(yes.map((e) => e.type)).toEqual(['task.approval_requested', 'task.approved']);
    expect(yes[1]).toMatchObject({
      taskId: approved,
      subject: 'alice',
      actor: { subject: 'bob', kind: 'user' },
      data: { approver: { subject: 'bob' } },
    });
    const no = await bundleOf(rejected);
    expect(no.map((e) => e.type)).toEqual(['task.approval_requested', 'task.rejected']);
    expect(no[1]).toMatchObject({
      taskId: rejected,
      actor: { subject: 'bob', kind: 'user' },
      data: { approver: { subject: 'bob' }, reason: 'wrong collection' },
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
