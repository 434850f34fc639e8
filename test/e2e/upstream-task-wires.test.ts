import type { ChildProcess } from 'node:child_process';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { planUpstreams } from '../support/upstreams.ts';
import { coreWire, extWire, jobToolsWire, type Answer } from '../support/wires.ts';
import { startWorkerProcess, waitForExit } from '../support/worker-process.ts';

// Upstream tasks on either task wire, with real worker processes: an upstream task that
// waits for input shows input_required on our task (every client wire) and goes on when the
// upstream does; an upstream that offers the 2026-07-28 tasks extension (the demo's second
// instance, `modern.`) is driven on that wire, through a crash and a cancel.
let stack: Stack;
let upstreams: Awaited<ReturnType<typeof planUpstreams>>;
let token: string;
const workers = new Map<string, ChildProcess>();

beforeAll(async () => {
  upstreams = await planUpstreams({
    demoStepMs: 700,
    modern: true,
    // The same demo upstream again, with a short deadline for its approval tool.
    extra: ({ demoUrl }) =>
      [
        '  short:',
        `    url: ${demoUrl}`,
        '    prefix: short.',
        '    scope: upstream:demo',
        '    include: [approve_change]',
        '    tools:',
        '      approve_change: { limits: { defaultDeadlineMs: 4000, maxDeadlineMs: 4000 } }',
      ].join('\n'),
  });
  await upstreams.start();
  stack = await startStack({
    workers: 0,
    env: { UPSTREAMS_FILE: upstreams.file },
    onIssuer: (issuer) => upstreams.trust(issuer),
  });
  for (const id of ['wire-a', 'wire-b']) workers.set(id, await startWorkerProcess(stack, id));
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

const trail = async (taskId: string) =>
  (
    await sql(stack.db.url, `SELECT type FROM audit.events WHERE task_id = $1 ORDER BY seq`, [
      taskId,
    ])
  ).map((e) => e.type as string);

for (const wire of [coreWire, extWire, jobToolsWire]) {
  test(`an upstream task waiting for input shows input_required on the ${wire('').name} wire, then completes`, async () => {
    const w = wire(stack.mcpUrl);
    const name = change('wire');
    const id = await w.start(token, 'demo.approve_change', { change: name });
    const waiting = await pollUntil(
      () => w.get(token, id),
      (a) => statusOf(a) === 'input_required',
      20_000,
    );
    expect(JSON.stringify(waiting)).toContain(`approve change ${name}`);
    if (w.name.startsWith('job tools'))
      expect(waiting.ok && waiting.value.inputFrom).toBe('downstream');
    // The worker keeps its lease and keeps polling the upstream meanwhile.
    const [row] = await sql(
      stack.db.url,
      `SELECT status, lease_owner, lease_expires_at > now() AS live FROM app.tasks WHERE id = $1`,
      [id],
    );
    expect(row).toMatchObject({ status: 'input_required', live: true });
    expect(row.lease_owner).not.toBeNull();
    const polled = upstreams.calls().filter((c) => c.method === 'tasks/get').length;
    await pollUntil(
      async () => upstreams.calls().filter((c) => c.method === 'tasks/get').length,
      (n) => n > polled + 1,
      10_000,
    );
    expect(statusOf(await w.get(token, id))).toBe('input_required');

    expect(await upstreams.approve(name)).toBe(1);
    const done = await pollUntil(() => w.get(token, id), terminal, 20_000);
    expect(statusOf(done)).toBe('completed');
    // The upstream's own result (its structuredContent on every wire).
    expect(JSON.stringify(await w.result(token, id))).toContain(
      `"change":"${name}","applied":true`,
    );
    const types = await trail(id);
    const at = (t: string) => types.indexOf(t);
    expect(at('task.input_required')).toBeGreaterThan(at('upstream.task_created'));
    expect(at('task.input_resolved')).toBeGreaterThan(at('task.input_required'));
    expect(at('task.completed')).toBeGreaterThan(at('task.input_resolved'));
    expect(types.filter((t) => t === 'task.input_required')).toHaveLength(1);
  }, 60_000);
}

test('past its deadline while input_required, the task fails and the upstream task is cancelled', async () => {
  const w = coreWire(stack.mcpUrl);
  const before = upstreams.calls().length;
  const id = await w.start(token, 'short.approve_change', { change: change('late') });
  await pollUntil(
    () => w.get(token, id),
    (a) => statusOf(a) === 'input_required',
    20_000,
  );
  const done = await pollUntil(() => w.get(token, id), terminal, 20_000);
  expect(statusOf(done)).toBe('failed');
  const [row] = await sql(stack.db.url, `SELECT outcome FROM app.tasks WHERE id = $1`, [id]);
  expect(row.outcome).toBe('deadline');
  expect(
    upstreams
      .calls()
      .slice(before)
      .some((c) => c.method === 'tasks/cancel'),
  ).toBe(true);
}, 60_000);

test('cancel and revocation reach an input_required task: its worker cancels the upstream task', async () => {
  const w = coreWire(stack.mcpUrl);
  const dave = await stack.token('dave', 'acme');
  const before = upstreams.calls().length;
  const cancelled = await w.start(token, 'demo.approve_change', { change: change('cancel') });
  const revoked = await w.start(dave, 'demo.approve_change', { change: change('revoke') });
  for (const [t, id] of [
    [token, cancelled],
    [dave, revoked],
  ] as const) {
    await pollUntil(
      () => w.get(t, id),
      (a) => statusOf(a) === 'input_required',
      20_000,
    );
  }
  expect((await w.cancel(token, cancelled)).ok).toBe(true);
  await stack.idpUser('disable', 'dave', 'acme');
  try {
    const rows = await pollUntil(
      () =>
        sql(stack.db.url, `SELECT id, status, outcome FROM app.tasks WHERE id = ANY($1)`, [
          [cancelled, revoked],
        ]),
      (r) => r.length === 2 && r.every((x) => x.status === 'cancelled'),
      20_000,
    );
    expect(Object.fromEntries(rows.map((r) => [r.id, r.outcome]))).toEqual({
      [cancelled]: 'cancelled',
      [revoked]: 'revoked',
    });
  } finally {
    await stack.idpUser('enable', 'dave', 'acme');
  }
  const events = await sql(
    stack.db.url,
    `SELECT task_id, body::jsonb->'data' AS data FROM audit.events
      WHERE type = 'upstream.task_cancelled' AND task_id = ANY($1)`,
    [[cancelled, revoked]],
  );
  expect(events).toHaveLength(2);
  for (const e of events) expect(e.data.acknowledged).toBe(true);
  expect(
    upstreams
      .calls()
      .slice(before)
      .filter((c) => c.method === 'tasks/cancel'),
  ).toHaveLength(2);
}, 60_000);

test('a long tool of a 2026-07-28 upstream runs on the tasks extension: one creation, polls, the result inline', async () => {
  const w = coreWire(stack.mcpUrl);
  const before = upstreams.modernCalls().length;
  const id = await w.start(token, 'modern.build_artifact', { project: 'modern-p' });
  const done = await pollUntil(() => w.get(token, id), terminal, 30_000);
  expect(statusOf(done)).toBe('completed');
  expect(JSON.stringify(await w.result(token, id))).toContain('modern-p.tar.gz');
  const seen = upstreams.modernCalls().slice(before);
  expect(seen.filter((c) => c.method === 'tools/call')).toHaveLength(1);
  expect(seen.filter((c) => c.method === 'tasks/get').length).toBeGreaterThan(1);
  expect(seen.some((c) => c.method === 'tasks/result')).toBe(false);
  for (const c of seen) {
    expect(c.sub).toBe('alice');
    expect(c.act).toMatchObject({ sub: 'mcp-worker' });
  }
  const [step] = await sql(
    stack.db.url,
    `SELECT output->'value' AS ref FROM app.task_steps WHERE task_id = $1 AND step = 'upstream:create'`,
    [id],
  );
  expect(step.ref).toMatchObject({ wire: '2026-07-28', sessionId: null });
  const [created] = await sql(
    stack.db.url,
    `SELECT body::jsonb->'data' AS data FROM audit.events WHERE task_id = $1 AND type = 'upstream.task_created'`,
    [id],
  );
  expect(created.data).toMatchObject({ upstream: 'modern', wire: '2026-07-28' });
  // The 2025-11-25 demo is still driven on core tasks.
  const core = await w.start(token, 'demo.build_artifact', { project: 'core-p' });
  await pollUntil(() => w.get(token, core), terminal, 30_000);
  const [coreStep] = await sql(
    stack.db.url,
    `SELECT output->'value' AS ref FROM app.task_steps WHERE task_id = $1 AND step = 'upstream:create'`,
    [core],
  );
  expect(coreStep.ref.wire).toBe('2025-11-25');
}, 60_000);

test('input_required on a 2026-07-28 upstream is mirrored the same way', async () => {
  const w = extWire(stack.mcpUrl);
  const name = change('modern');
  const id = await w.start(token, 'modern.approve_change', { change: name });
  const waiting = await pollUntil(
    () => w.get(token, id),
    (a) => statusOf(a) === 'input_required',
    20_000,
  );
  expect(JSON.stringify(waiting)).toContain(`approve change ${name}`);
  expect(await upstreams.approve(name, upstreams.modernUrl)).toBe(1);
  const done = await pollUntil(() => w.get(token, id), terminal, 20_000);
  expect(statusOf(done)).toBe('completed');
  expect(JSON.stringify(done)).toContain(`applied ${name}`);
}, 60_000);

test('SIGKILL the worker during a 2026-07-28 upstream task: the next worker polls the same upstream task on that wire', async () => {
  const w = coreWire(stack.mcpUrl);
  const before = upstreams.modernCalls().length;
  const id = await w.start(token, 'modern.build_artifact', { project: 'modern-crash' });
  const [journaled] = await pollUntil(
    () =>
      sql(
        stack.db.url,
        `SELECT s.output->'value' AS ref, t.lease_owner FROM app.task_steps s JOIN app.tasks t ON t.id = s.task_id
          WHERE s.task_id = $1 AND s.step = 'upstream:create'`,
        [id],
      ),
    (r) => r.length === 1 && r[0].lease_owner !== null,
    15_000,
  );
  const victim = workers.get(journaled.lease_owner)!;
  victim.kill('SIGKILL');
  await waitForExit(victim);
  workers.delete(journaled.lease_owner);
  const done = await pollUntil(() => w.get(token, id), terminal, 40_000);
  expect(statusOf(done)).toBe('completed');
  expect(JSON.stringify(await w.result(token, id))).toContain('modern-crash.tar.gz');
  const seen = upstreams.modernCalls().slice(before);
  expect(seen.filter((c) => c.method === 'tools/call')).toHaveLength(1);
  const polls = seen.filter((c) => c.method === 'tasks/get');
  expect(new Set(polls.map((c) => c.taskId))).toEqual(new Set([journaled.ref.taskId]));
  const [{ owner }] = await sql(
    stack.db.url,
    `SELECT body::jsonb->'data'->>'worker' AS owner FROM audit.events
      WHERE task_id = $1 AND type = 'task.lease_taken'`,
    [id],
  );
  expect(owner).not.toBe(journaled.lease_owner);
  workers.set('wire-c', await startWorkerProcess(stack, 'wire-c'));
}, 90_000);

test('cancelling a task of a 2026-07-28 upstream sends tasks/cancel on that wire before our cancel returns', async () => {
  const w = coreWire(stack.mcpUrl);
  const before = upstreams.modernCalls().length;
  const id = await w.start(token, 'modern.build_artifact', { project: 'modern-cancel' });
  await pollUntil(
    async () => upstreams.modernCalls().slice(before),
    (calls) => calls.some((c) => c.method === 'tasks/get'),
    15_000,
  );
  expect((await w.cancel(token, id)).ok).toBe(true);
  const seen = upstreams.modernCalls().slice(before);
  expect(seen.filter((c) => c.method === 'tasks/cancel')).toHaveLength(1);
  const events = await sql(
    stack.db.url,
    `SELECT body::jsonb->'data' AS data FROM audit.events WHERE type = 'upstream.task_cancelled' AND task_id = $1`,
    [id],
  );
  expect(events[0].data).toMatchObject({ upstream: 'modern', acknowledged: true });
  const count = upstreams.modernCalls().length;
  await new Promise((r) => setTimeout(r, 1000));
  expect(upstreams.modernCalls()).toHaveLength(count);
}, 60_000);
