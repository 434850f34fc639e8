import type { ChildProcess } from 'node:child_process';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectV1 } from '../support/clients.ts';
import { startMisbehavingUpstream } from '../support/misbehaving-upstream.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { planUpstreams } from '../support/upstreams.ts';
import { coreWire } from '../support/wires.ts';
import { startWorkerProcess, waitForExit } from '../support/worker-process.ts';

// Upstream tasks under failure: a worker killed mid-task, a user disabled mid-run, an upstream
// that goes away, and one that answers garbage, too much or nothing. Real worker processes.
let stack: Stack;
let upstreams: Awaited<ReturnType<typeof planUpstreams>>;
let bad: Awaited<ReturnType<typeof startMisbehavingUpstream>>;
let token: string;
const workers = new Map<string, ChildProcess>();
const GRACE = { SHUTDOWN_GRACE_MS: '300' };

beforeAll(async () => {
  bad = await startMisbehavingUpstream();
  upstreams = await planUpstreams({
    demoStepMs: 1000,
    extra: [
      '  bad:',
      `    url: ${bad.url}`,
      '    prefix: bad.',
      '    scope: upstream:demo',
      '    mode: instant',
      '    timeoutMs: 1000',
      '    maxResponseBytes: 100000',
      '    breakerThreshold: 100',
    ].join('\n'),
  });
  await upstreams.start();
  stack = await startStack({
    workers: 0,
    env: { UPSTREAMS_FILE: upstreams.file },
    onIssuer: (issuer) => upstreams.trust(issuer),
  });
  // A short shutdown grace, so a SIGTERMed worker stops a run that is polling.
  for (const id of ['up-a', 'up-b']) workers.set(id, await startWorkerProcess(stack, id, GRACE));
  token = await stack.token('alice', 'acme');
}, 60_000);
afterAll(async () => {
  for (const c of workers.values()) c.kill('SIGKILL');
  await Promise.all([...workers.values()].map(waitForExit));
  await stack?.close();
  await upstreams?.close();
  await bad?.close();
});

const terminal = (a: any) =>
  a.ok && ['completed', 'failed', 'cancelled'].includes(a.value?.status ?? a.value?.task?.status);

async function journaledUpstreamTask(taskId: string) {
  const rows = await pollUntil(
    () =>
      sql(
        stack.db.url,
        `SELECT s.output->'value' AS ref, t.lease_owner FROM app.task_steps s JOIN app.tasks t ON t.id = s.task_id
          WHERE s.task_id = $1 AND s.step = 'upstream:create'`,
        [taskId],
      ),
    (r) => r.length === 1 && r[0].lease_owner !== null,
    15_000,
  );
  return rows[0] as { ref: { taskId: string; sessionId: string }; lease_owner: string };
}

test('SIGKILL the worker while an upstream task runs: another worker resumes polling the same upstream task', async () => {
  const w = coreWire(stack.mcpUrl);
  const before = upstreams.calls().length;
  const id = await w.start(token, 'demo.build_artifact', { project: 'crash' });
  const { ref, lease_owner } = await journaledUpstreamTask(id);
  const victim = workers.get(lease_owner)!;
  victim.kill('SIGKILL');
  await waitForExit(victim);
  workers.delete(lease_owner);
  const done = await pollUntil(() => w.get(token, id), terminal, 30_000);
  expect(done.ok && done.value.status).toBe('completed');
  expect(JSON.stringify(await w.result(token, id))).toContain('crash.tar.gz');

  const seen = upstreams.calls().slice(before);
  expect(seen.filter((c) => c.method === 'tools/call')).toHaveLength(1);
  const polls = seen.filter((c) => c.method === 'tasks/get' || c.method === 'tasks/result');
  expect(new Set(polls.map((c) => c.taskId))).toEqual(new Set([ref.taskId]));
  expect(new Set(polls.map((c) => c.sessionId))).toEqual(new Set([ref.sessionId]));
  const [{ owner }] = await sql(
    stack.db.url,
    `SELECT body::jsonb->'data'->>'worker' AS owner FROM audit.events
      WHERE task_id = $1 AND type = 'task.lease_taken'`,
    [id],
  );
  expect(owner).not.toBe(lease_owner);
  // The survivor (and a fresh one) keep serving.
  workers.set('up-c', await startWorkerProcess(stack, 'up-c', GRACE));
}, 60_000);

test('a worker shut down while polling leaves the upstream task running; another resumes it (no tasks/cancel)', async () => {
  const w = coreWire(stack.mcpUrl);
  const before = upstreams.calls().length;
  const id = await w.start(token, 'demo.build_artifact', { project: 'shutdown' });
  const { ref, lease_owner } = await journaledUpstreamTask(id);
  const leaving = workers.get(lease_owner)!;
  leaving.kill('SIGTERM');
  await waitForExit(leaving);
  workers.delete(lease_owner);
  const done = await pollUntil(() => w.get(token, id), terminal, 30_000);
  expect(done.ok && done.value.status).toBe('completed');
  const seen = upstreams.calls().slice(before);
  expect(seen.filter((c) => c.method === 'tasks/cancel')).toEqual([]);
  expect(seen.filter((c) => c.method === 'tools/call')).toHaveLength(1);
  expect(new Set(seen.filter((c) => c.method === 'tasks/get').map((c) => c.taskId))).toEqual(
    new Set([ref.taskId]),
  );
  workers.set(
    `${lease_owner}-again`,
    await startWorkerProcess(stack, `${lease_owner}-again`, GRACE),
  );
}, 60_000);

test('disabling the user mid-run cancels the upstream task (tasks/cancel) with reason revoked', async () => {
  const carol = await stack.token('carol', 'acme');
  const w = coreWire(stack.mcpUrl);
  const before = upstreams.calls().length;
  const id = await w.start(carol, 'demo.build_artifact', { project: 'revoked' });
  await journaledUpstreamTask(id);
  await stack.idpUser('disable', 'carol', 'acme');
  const rows = await pollUntil(
    () => sql(stack.db.url, `SELECT status FROM app.tasks WHERE id = $1`, [id]),
    (r) => r[0]?.status === 'cancelled',
    15_000,
  );
  expect(rows[0].status).toBe('cancelled');
  const seen = upstreams.calls().slice(before);
  const cancelAt = seen.findIndex((c) => c.method === 'tasks/cancel');
  expect(cancelAt).toBeGreaterThan(0);
  expect(seen[cancelAt]!.sub).toBe('carol');
  const count = upstreams.calls().length;
  await new Promise((r) => setTimeout(r, 1500));
  expect(upstreams.calls()).toHaveLength(count);
  const events = await sql(
    stack.db.url,
    `SELECT type, body::jsonb->>'reason' AS reason, body::jsonb->'data' AS data FROM audit.events
      WHERE task_id = $1 AND type IN ('task.cancelled', 'upstream.task_cancelled') ORDER BY seq`,
    [id],
  );
  expect(events.map((e) => e.type)).toEqual(['upstream.task_cancelled', 'task.cancelled']);
  expect(events[0].data.acknowledged).toBe(true);
  expect(events[1].reason).toBe('revoked');
  await stack.idpUser('enable', 'carol', 'acme');
}, 60_000);

test('with the upstream stopped a task waits with the circuit status and finishes after it returns', async () => {
  await upstreams.stopDemo();
  const w = coreWire(stack.mcpUrl);
  const id = await w.start(token, 'demo.build_artifact', { project: 'outage' });
  const waiting = await pollUntil(
    () => sql(stack.db.url, `SELECT status, status_message FROM app.tasks WHERE id = $1`, [id]),
    (r) => /waiting: downstream upstream:demo unavailable/.test(r[0]?.status_message ?? ''),
    20_000,
  );
  expect(waiting[0].status).toBe('working');
  await upstreams.restartDemo();
  const done = await pollUntil(() => w.get(token, id), terminal, 40_000);
  expect(done.ok && done.value.status).toBe('completed');
  expect(upstreams.calls().filter((c) => c.method === 'tools/call')).toHaveLength(1);
}, 90_000);

test('an upstream answering garbage, too much or nothing is a clear tool error, audited, never a 500', async () => {
  const client = await connectV1(stack.mcpUrl, token);
  try {
    for (const [name, code] of [
      ['bad.garbage', 'upstream_protocol_error'],
      ['bad.huge', 'upstream_response_too_large'],
      ['bad.hang', 'upstream_timeout'],
    ] as const) {
      const r = await client.request(
        { method: 'tools/call', params: { name, arguments: {} } },
        CallToolResultSchema,
      );
      expect(r.isError).toBe(true);
      expect((r._meta as any)['io.mcp-task-gateway/tool-error'].code).toBe(code);
    }
  } finally {
    await client.close();
  }
  const audited = await sql(
    stack.db.url,
    `SELECT body::jsonb->>'tool' AS tool, body::jsonb->'data'->>'outcome' AS outcome
       FROM audit.events WHERE type = 'upstream.call' AND body::jsonb->>'tool' LIKE 'bad.%' ORDER BY seq`,
  );
  expect(audited).toEqual([
    { tool: 'bad.garbage', outcome: 'upstream_protocol_error' },
    { tool: 'bad.huge', outcome: 'upstream_response_too_large' },
    { tool: 'bad.hang', outcome: 'upstream_timeout' },
  ]);
}, 30_000);
