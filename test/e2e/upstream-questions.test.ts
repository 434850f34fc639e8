import type { ChildProcess } from 'node:child_process';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectV1 } from '../support/clients.ts';
import { pollUntil } from '../support/poll.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { planUpstreams } from '../support/upstreams.ts';
import { extWire, jobToolsWire, type Answer } from '../support/wires.ts';
import { startWorkerProcess, waitForExit } from '../support/worker-process.ts';

// An upstream task that asks (input_required with a form-mode elicitation) has its question
// relayed to our caller on the caller's wire, and the caller's answer sent to the upstream on
// the upstream's wire: the demo's approve_change with `elicit` (2025-11-25 and 2026-07-28)
// and server-everything's simulate-research-query with `ambiguous`, with real clients and
// real worker processes, one of them killed while the question waits.
let stack: Stack;
let upstreams: Awaited<ReturnType<typeof planUpstreams>>;
let token: string;
const workers = new Map<string, ChildProcess>();

beforeAll(async () => {
  upstreams = await planUpstreams({ demoStepMs: 400, modern: true, everything: true });
  await upstreams.start();
  stack = await startStack({
    workers: 0,
    env: { UPSTREAMS_FILE: upstreams.file },
    onIssuer: (issuer) => upstreams.trust(issuer),
  });
  workers.set('ask-a', await startWorkerProcess(stack, 'ask-a'));
  token = await stack.token('alice', 'acme');
}, 90_000);
afterAll(async () => {
  for (const c of workers.values()) c.kill('SIGKILL');
  await Promise.all([...workers.values()].map(waitForExit));
  await stack?.close();
  await upstreams?.close();
});

const statusOf = (a: Answer) => (a.ok ? (a.value?.status ?? a.value?.task?.status) : undefined);
const terminal = (a: Answer) => ['completed', 'failed', 'cancelled'].includes(statusOf(a));
const change = (label: string) => `${label}-${Math.random().toString(36).slice(2, 8)}`;
const steps = async (taskId: string) =>
  (
    await sql(stack.db.url, `SELECT step FROM app.task_steps WHERE task_id = $1 ORDER BY seq`, [
      taskId,
    ])
  ).map((s) => s.step as string);
const parked = (taskId: string) =>
  pollUntil(
    () => sql(stack.db.url, 'SELECT status, lease_owner FROM app.tasks WHERE id = $1', [taskId]),
    (r) => r[0]?.status === 'input_required' && r[0]?.lease_owner === null,
    20_000,
  );
const events = async (taskId: string) =>
  sql<{ type: string; data: Record<string, unknown> }>(
    stack.db.url,
    `SELECT type, body::jsonb -> 'data' AS data FROM audit.events WHERE task_id = $1 ORDER BY seq`,
    [taskId],
  );

test('2025-11-25 upstream, 2025-11-25 caller: the v1 client is asked on its tasks/result stream and its answer reaches the upstream', async () => {
  const name = change('core');
  const before = upstreams.demoCalls().length;
  const client = await connectV1(stack.mcpUrl, token, { elicitation: { form: {} } });
  const asked: any[] = [];
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request.params);
    return { action: 'accept', content: { approve: true, note: 'ok by me' } };
  });
  let taskId = '';
  let result: any;
  try {
    for await (const m of client.experimental.tasks.callToolStream(
      { name: 'demo.approve_change', arguments: { change: name, elicit: true } },
      CallToolResultSchema,
      { task: {} },
    )) {
      if (m.type === 'taskCreated') taskId = m.task.taskId;
      if (m.type === 'result') result = m.result;
      if (m.type === 'error') throw m.error;
    }
  } finally {
    await client.close();
  }
  expect(asked).toEqual([
    expect.objectContaining({
      mode: 'form',
      message: `Approve change ${name}?`,
      requestedSchema: expect.objectContaining({ required: ['approve'] }),
    }),
  ]);
  expect(result.structuredContent).toEqual({ change: name, applied: true });
  expect(await steps(taskId)).toEqual([
    'upstream:create',
    'upstream:question:1',
    'ask:1',
    'upstream:answer:1',
  ]);
  // One creation; every request of the task on the session it was created in.
  const seen = upstreams.demoCalls().slice(before);
  expect(seen.filter((c) => c.method === 'tools/call')).toHaveLength(1);
  expect(new Set(seen.map((c) => c.sessionId)).size).toBe(1);
  const trail = await events(taskId);
  expect(trail.find((e) => e.type === 'task.input_requested')?.data).toMatchObject({
    key: 'ask:1',
    fields: ['approve', 'note'],
  });
  expect(trail.find((e) => e.type === 'task.input_received')?.data).toMatchObject({
    key: 'ask:1',
    answer: { action: 'accept' },
  });
}, 60_000);

test('2026-07-28 upstream, 2026-07-28 caller: inputRequests in tasks/get, tasks/update answers, the upstream gets tasks/update', async () => {
  const name = change('ext');
  const before = upstreams.modernCalls().length;
  const taskId = await extWire(stack.mcpUrl).start(token, 'modern.approve_change', {
    change: name,
    elicit: true,
  });
  await parked(taskId);
  const got = (
    await rpc2026(stack.mcpUrl, token, 'tasks/get', { taskId }, { tasksExtension: true })
  ).body.result;
  expect(got.status).toBe('input_required');
  expect(got.inputRequests).toEqual({
    'ask:1': {
      method: 'elicitation/create',
      params: expect.objectContaining({ mode: 'form', message: `Approve change ${name}?` }),
    },
  });
  // Declined: the upstream is told so, and its tool error is our task's result.
  const ok = await rpc2026(
    stack.mcpUrl,
    token,
    'tasks/update',
    { taskId, inputResponses: { 'ask:1': { action: 'decline' } } },
    { tasksExtension: true },
  );
  expect(ok.body.error).toBeUndefined();
  const done = await pollUntil(() => extWire(stack.mcpUrl).get(token, taskId), terminal, 20_000);
  expect(statusOf(done)).toBe('completed');
  expect(JSON.stringify(done)).toContain(`change ${name} not approved (decline)`);
  const seen = upstreams.modernCalls().slice(before);
  expect(seen.filter((c) => c.method === 'tools/call')).toHaveLength(1);
  expect(seen.filter((c) => c.method === 'tasks/update')).toHaveLength(1);
}, 60_000);

test("server-everything's simulate-research-query with ambiguous: true asks for a clarification, answered through the job tools", async () => {
  const jobs = jobToolsWire(stack.mcpUrl);
  const jobId = await jobs.start(token, 'ev.simulate-research-query', {
    topic: 'python',
    ambiguous: true,
  });
  await parked(jobId);
  const status = await jobs.get(token, jobId);
  expect(JSON.stringify(status)).toContain('could have multiple interpretations');
  // Its titled single-select (oneOf const/title) is offered as an enum with its titles.
  expect(JSON.stringify(status)).toContain('"enum":["programming","snake","comedy"]');
  const client = await connectV1(stack.mcpUrl, token);
  try {
    const wrong = await client.callTool({
      name: 'answer_job',
      arguments: { jobId, response: { action: 'accept', content: { interpretation: 'cobra' } } },
    });
    expect(wrong.isError).toBe(true);
    const right = await client.callTool({
      name: 'answer_job',
      arguments: { jobId, response: { action: 'accept', content: { interpretation: 'snake' } } },
    });
    expect(right.isError).toBeFalsy();
  } finally {
    await client.close();
  }
  const done = await pollUntil(() => jobs.get(token, jobId), terminal, 30_000);
  expect(statusOf(done)).toBe('completed');
  const client2 = await connectV1(stack.mcpUrl, token);
  try {
    const result = await client2.callTool({ name: 'get_job_result', arguments: { jobId } });
    expect(JSON.stringify(result.content)).toContain('python (snake)');
  } finally {
    await client2.close();
  }
}, 60_000);

test('SIGKILL the worker while the question waits: the next worker sends the answer on the same upstream session, nothing asked twice', async () => {
  const name = change('kill');
  const before = upstreams.demoCalls().length;
  const jobs = jobToolsWire(stack.mcpUrl);
  const jobId = await jobs.start(token, 'demo.approve_change', { change: name, elicit: true });
  // The question is journaled and the task parked; every worker is killed meanwhile.
  await parked(jobId);
  for (const [id, c] of workers) {
    c.kill('SIGKILL');
    await waitForExit(c);
    workers.delete(id);
  }
  const client = await connectV1(stack.mcpUrl, token);
  try {
    const answered = await client.callTool({
      name: 'answer_job',
      arguments: { jobId, response: { action: 'accept', content: { approve: true } } },
    });
    expect(answered.isError).toBeFalsy();
  } finally {
    await client.close();
  }
  workers.set('ask-b', await startWorkerProcess(stack, 'ask-b'));
  const done = await pollUntil(() => jobs.get(token, jobId), terminal, 30_000);
  expect(statusOf(done)).toBe('completed');
  expect(JSON.stringify(done)).not.toContain('not approved');
  expect(await steps(jobId)).toEqual([
    'upstream:create',
    'upstream:question:1',
    'ask:1',
    'upstream:answer:1',
  ]);
  const seen = upstreams.demoCalls().slice(before);
  expect(seen.filter((c) => c.method === 'tools/call')).toHaveLength(1);
  // The killed worker's session is the one the next worker answered and polled on.
  expect(new Set(seen.map((c) => c.sessionId)).size).toBe(1);
  const trail = (await events(jobId)).map((e) => e.type);
  expect(trail.filter((t) => t === 'task.input_requested')).toHaveLength(1);
  expect(trail.filter((t) => t === 'task.input_received')).toHaveLength(1);
}, 90_000);

test('the 2025-11-25 upstream restarted while the question waits (its session and question gone): the answer ends the task with upstream_session_lost, no hang', async () => {
  const jobs = jobToolsWire(stack.mcpUrl);
  const jobId = await jobs.start(token, 'demo.approve_change', {
    change: change('lost'),
    elicit: true,
  });
  await parked(jobId);
  await upstreams.stopDemo();
  await upstreams.restartDemo();
  const client = await connectV1(stack.mcpUrl, token);
  try {
    const answered = await client.callTool({
      name: 'answer_job',
      arguments: { jobId, response: { action: 'accept', content: { approve: true } } },
    });
    expect(answered.isError).toBeFalsy();
  } finally {
    await client.close();
  }
  const done = await pollUntil(() => jobs.get(token, jobId), terminal, 30_000);
  expect(statusOf(done)).toBe('completed');
  const [row] = await sql(stack.db.url, 'SELECT outcome FROM app.tasks WHERE id = $1', [jobId]);
  expect(row.outcome).toBe('tool_error');
  const reader = await connectV1(stack.mcpUrl, token);
  try {
    const result = await reader.callTool({ name: 'get_job_result', arguments: { jobId } });
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result)).toContain('upstream_session_lost');
  } finally {
    await reader.close();
  }
}, 60_000);
