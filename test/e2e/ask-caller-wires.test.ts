import { fileURLToPath } from 'node:url';
import type { ChildProcess } from 'node:child_process';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { GetTaskResultV2Schema } from '@modelcontextprotocol/ext-tasks/core/v2';
import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { coreWire, extWire, jobToolsWire } from '../support/wires.ts';
import { startWorkerProcess, waitForExit } from '../support/worker-process.ts';

// A pack tool asks its caller midway (ctx.ask), on every wire the protocol's own way, with
// real clients and real worker processes.
const PACK = fileURLToPath(new URL('../fixtures/packs/asks-caller.ts', import.meta.url));
let stack: Stack;
let alice: string;
let bob: string;
const children: ChildProcess[] = [];

beforeAll(async () => {
  stack = await startStack({
    workers: 0,
    env: { TOOL_PACKS: `@mtg/demo-tools,${PACK}`, ASK_WRITE_MS: '1500' },
  });
  children.push(await startWorkerProcess(stack, 'ask-a'));
  alice = await stack.token('alice', 'acme');
  bob = await stack.token('bob', 'acme');
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await stack?.close();
});

const call = (records: number) => ({ name: 'confirm_change', arguments: { records } });
const events = (taskId: string) =>
  sql<{ type: string; data: Record<string, unknown> }>(
    stack.db.url,
    `SELECT type, body::jsonb -> 'data' AS data FROM audit.events WHERE task_id = $1 ORDER BY seq`,
    [taskId],
  );
const parked = (taskId: string) =>
  pollUntil(
    () => sql(stack.db.url, 'SELECT status, lease_owner FROM app.tasks WHERE id = $1', [taskId]),
    (r) => r[0]?.status === 'input_required' && r[0]?.lease_owner === null,
  );

test('2025-11-25: the v1 SDK client is asked on the tasks/result stream and its elicitation handler answers', async () => {
  const client = await connectV1(stack.mcpUrl, alice, { elicitation: { form: {} } });
  const asked: unknown[] = [];
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request.params);
    return { action: 'accept', content: { confirm: true, note: 'ticket 7' } };
  });
  let taskId = '';
  let result: unknown;
  for await (const m of client.experimental.tasks.callToolStream(
    call(40000),
    CallToolResultSchema,
    {
      task: {},
    },
  )) {
    if (m.type === 'taskCreated') taskId = m.task.taskId;
    if (m.type === 'result') result = m.result;
    if (m.type === 'error') throw m.error;
  }
  await client.close();
  expect(asked).toEqual([
    expect.objectContaining({
      mode: 'form',
      message: 'This will change 40000 records. Continue?',
      requestedSchema: expect.objectContaining({ required: ['confirm'] }),
      _meta: { 'io.modelcontextprotocol/related-task': { taskId } },
    }),
  ]);
  expect((result as { structuredContent: unknown }).structuredContent).toEqual({
    written: 40000,
    note: 'ticket 7',
  });
  const trail = await events(taskId);
  expect(trail.find((e) => e.type === 'task.input_received')?.data).toMatchObject({
    key: 'ask:1',
    wire: 'core-2025',
    answer: { action: 'accept', fields: { confirm: true, note: '[8 characters withheld]' } },
  });
});

test('2026-07-28: tasks/get carries the input request, tasks/update answers it, a bad answer is refused and the task keeps waiting', async () => {
  const taskId = await extWire(stack.mcpUrl).start(alice, 'confirm_change', { records: 5 });
  await parked(taskId);
  const got = (
    await rpc2026(stack.mcpUrl, alice, 'tasks/get', { taskId }, { tasksExtension: true })
  ).body.result;
  const task = GetTaskResultV2Schema.parse(got);
  expect(task.status).toBe('input_required');
  expect(got.inputRequests).toEqual({
    'ask:1': {
      method: 'elicitation/create',
      params: expect.objectContaining({
        mode: 'form',
        message: expect.stringContaining('5 records'),
      }),
    },
  });
  const bad = await rpc2026(
    stack.mcpUrl,
    alice,
    'tasks/update',
    { taskId, inputResponses: { 'ask:1': { action: 'accept', content: { confirm: 'yes' } } } },
    { tasksExtension: true },
  );
  expect(bad.body).toMatchObject({ error: { code: -32602 } });
  expect(bad.body.error.message).toMatch(/confirm must be true or false/);
  const ok = await rpc2026(
    stack.mcpUrl,
    alice,
    'tasks/update',
    { taskId, inputResponses: { 'ask:1': { action: 'accept', content: { confirm: true } } } },
    { tasksExtension: true },
  );
  expect(ok.body.result).toMatchObject({ resultType: 'complete' });
  const done = await pollUntil(
    async () =>
      (await rpc2026(stack.mcpUrl, alice, 'tasks/get', { taskId }, { tasksExtension: true })).body
        .result,
    (r) => r.status === 'completed',
  );
  expect(done.result.structuredContent).toEqual({ written: 5, note: null });
});

test('job tools: get_job_status shows the question and its form, answer_job answers it', async () => {
  const jobs = jobToolsWire(stack.mcpUrl);
  const jobId = await jobs.start(alice, 'confirm_change', { records: 9 });
  await parked(jobId);
  const status = await jobs.get(alice, jobId);
  expect(status).toMatchObject({
    ok: true,
    value: {
      status: 'input_required',
      inputFrom: 'caller',
      input: { key: 'ask:1', requestedSchema: { required: ['confirm'] } },
    },
  });
  const client = await connectV1(stack.mcpUrl, alice);
  const answered = await client.callTool({
    name: 'answer_job',
    arguments: { jobId, response: { action: 'decline' } },
  });
  await client.close();
  expect(answered.isError).toBeFalsy();
  const done = await pollUntil(
    () => jobs.get(alice, jobId),
    (a) => a.ok && a.value.status === 'completed',
  );
  expect(done.ok).toBe(true);
  const result = await jobs.result(alice, jobId);
  expect(result).toMatchObject({ ok: true, value: { written: 0, answer: 'decline' } });
});

test("another subject's answer is refused exactly as a missing task's, on every wire", async () => {
  const taskId = await extWire(stack.mcpUrl).start(alice, 'confirm_change', { records: 3 });
  await parked(taskId);
  const missing = 'f'.repeat(32);
  const update = (token: string, id: string) =>
    rpc2026(
      stack.mcpUrl,
      token,
      'tasks/update',
      { taskId: id, inputResponses: { 'ask:1': { action: 'accept', content: { confirm: true } } } },
      { tasksExtension: true },
    ).then((r) => r.body.error);
  expect(await update(bob, taskId)).toEqual(await update(bob, missing));
  const job = async (id: string) => {
    const c = await connectV1(stack.mcpUrl, bob);
    try {
      return await c.callTool({
        name: 'answer_job',
        arguments: { jobId: id, response: { action: 'accept', content: { confirm: true } } },
      });
    } finally {
      await c.close();
    }
  };
  expect(await job(taskId)).toEqual(await job(missing));
  expect((await job(taskId)).content).toEqual([{ type: 'text', text: 'Task not found' }]);
  // Still parked, unanswered; the refusals are audited with their real reason.
  expect(
    (await sql(stack.db.url, 'SELECT status FROM app.tasks WHERE id = $1', [taskId]))[0],
  ).toEqual({ status: 'input_required' });
  const denied = await sql(
    stack.db.url,
    `SELECT reason FROM audit.events WHERE type = 'task.denied' AND task_id = $1`,
    [taskId],
  );
  expect(denied.map((d) => d.reason)).toContain('other_subject');
  await coreWire(stack.mcpUrl).cancel(alice, taskId);
});

test('a worker SIGKILLed while a question is pending, and again after the answer: asked once, written once', async () => {
  const taskId = await extWire(stack.mcpUrl).start(alice, 'confirm_change', { records: 11 });
  await parked(taskId);
  // Nothing holds the parked task: the worker dies and another comes.
  children[0]!.kill('SIGKILL');
  await waitForExit(children[0]!);
  children.push(await startWorkerProcess(stack, 'ask-b'));
  await rpc2026(
    stack.mcpUrl,
    alice,
    'tasks/update',
    { taskId, inputResponses: { 'ask:1': { action: 'accept', content: { confirm: true } } } },
    { tasksExtension: true },
  );
  // Killed in the write step, after the answer was journaled.
  await pollUntil(
    () => sql(stack.db.url, 'SELECT lease_owner FROM app.tasks WHERE id = $1', [taskId]),
    (r) => r[0]?.lease_owner === 'ask-b',
  );
  children[1]!.kill('SIGKILL');
  await waitForExit(children[1]!);
  children.push(await startWorkerProcess(stack, 'ask-c', { WORKER_LEASE_MS: '1000' }));
  const done = await pollUntil(
    async () =>
      (await rpc2026(stack.mcpUrl, alice, 'tasks/get', { taskId }, { tasksExtension: true })).body
        .result,
    (r) => r.status === 'completed',
    45_000,
  );
  expect(done.result.structuredContent).toEqual({ written: 11, note: null });
  const trail = await events(taskId);
  expect(trail.filter((e) => e.type === 'task.input_requested')).toHaveLength(1);
  expect(trail.filter((e) => e.type === 'task.input_received')).toHaveLength(1);
  const steps = await sql(
    stack.db.url,
    'SELECT step FROM app.task_steps WHERE task_id = $1 ORDER BY seq',
    [taskId],
  );
  expect(steps.map((s) => s.step)).toEqual(['count', 'ask:1', 'write']);
});
