// The worker's writes whose commit outcome is unknown: its connection breaks after the write
// reached PostgreSQL, before the answer (the write committed; the worker does not know).
// The worker gives the lease back and the job is retried; the retry resumes from what did
// commit, and writes nothing twice: one journal row and one `task.step_completed` per step,
// one result and one `task.completed`, an audit chain that verifies. Only the worker
// reaches PostgreSQL through the relay; the gateway and the assertions go direct.
import pg from 'pg';
import { verifyAuditTrail } from '@mtg/audit';
import { pollUntil } from '../support/poll.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';

let stack: Stack;
let proxy: TcpProxy;

beforeAll(async () => {
  stack = await startStack({ workers: 0, env: { DEMO_STEP_MS: '100' } });
  const db = new URL(stack.db.url);
  proxy = await startTcpProxy({ host: db.hostname, port: Number(db.port || 5432) });
  await stack.addWorker({ DATABASE_URL: proxy.via(stack.db.logins.worker) });
});
afterAll(async () => {
  await stack?.close();
  await proxy?.close();
});

const STEPS = ['read-source', 'compute:0', 'compute:1', 'compute:2'];

async function startReport(report: string): Promise<string> {
  const r = await rpc2026(
    stack.mcpUrl,
    await stack.token('uma', 'acme'),
    'tools/call',
    { name: 'generate_report', arguments: { report } },
    { tasksExtension: true },
  );
  expect(r.body.result?.taskId).toEqual(expect.any(String));
  return r.body.result.taskId as string;
}

const ended = (taskId: string) =>
  pollUntil(
    async () =>
      (
        await sql<{ status: string; outcome: string | null; attempts: number }>(
          stack.db.url,
          'SELECT status, outcome, attempts FROM app.tasks WHERE id = $1',
          [taskId],
        )
      )[0]!,
    (t) => !['working', 'input_required'].includes(t.status),
    30_000,
  );

const journal = (taskId: string) =>
  sql<{ step: string; n: number }>(
    stack.db.url,
    'SELECT step, count(*)::int AS n FROM app.task_steps WHERE task_id = $1 GROUP BY step ORDER BY step',
    [taskId],
  );

const eventCounts = async (taskId: string) =>
  Object.fromEntries(
    (
      await sql<{ type: string; step: string | null; n: number }>(
        stack.db.url,
        `SELECT type, (replace(body, '\\u0000', '')::jsonb) -> 'data' ->> 'step' AS step,
                count(*)::int AS n
           FROM audit.events WHERE task_id = $1 GROUP BY 1, 2`,
        [taskId],
      )
    ).map((r) => [r.step ? `${r.type} ${r.step}` : r.type, r.n]),
  );

async function verified() {
  const owner = new pg.Client({ connectionString: stack.db.url });
  await owner.connect();
  try {
    return await verifyAuditTrail(owner);
  } finally {
    await owner.end();
  }
}

/** What every run of the report must have written once, cut or not. */
async function expectWrittenOnce(taskId: string) {
  expect(await ended(taskId)).toMatchObject({ status: 'completed', outcome: 'completed' });
  expect(await journal(taskId)).toEqual(STEPS.map((step) => ({ step, n: 1 })).sort(byStep));
  const events = await eventCounts(taskId);
  for (const step of STEPS) expect(events[`task.step_completed ${step}`]).toBe(1);
  expect(events['task.completed']).toBe(1);
  expect(events['task.failed']).toBeUndefined();
  const results = await sql<{ n: number }>(
    stack.db.url,
    'SELECT count(*)::int AS n FROM app.task_results WHERE task_id = $1',
    [taskId],
  );
  expect(results[0]!.n).toBe(1);
  expect(await verified()).toMatchObject({ ok: true });
  return events;
}
const byStep = (a: { step: string }, b: { step: string }) => (a.step < b.step ? -1 : 1);

test("a step's journal write whose commit outcome is unknown: the retry resumes after it, and nothing is journaled or audited twice", async () => {
  const cut = proxy.cutAtCommitOf('INSERT INTO app.task_steps');
  const taskId = await startReport('journal-cut');
  await cut;
  await expectWrittenOnce(taskId);
  // The cut run gave its lease back (a database failure is not the tool's: a retry) and a
  // second run, under the next lease, took the first step from the journal the cut run had
  // committed, and journaled the others.
  expect(await ended(taskId)).toMatchObject({ attempts: 2 });
  const rows = await sql<{ step: string; lease_epoch: number }>(
    stack.db.url,
    'SELECT step, lease_epoch FROM app.task_steps WHERE task_id = $1 ORDER BY seq',
    [taskId],
  );
  expect(rows).toEqual([
    { step: 'read-source', lease_epoch: 1 },
    { step: 'compute:0', lease_epoch: 2 },
    { step: 'compute:1', lease_epoch: 2 },
    { step: 'compute:2', lease_epoch: 2 },
  ]);
});

test('a completion whose commit outcome is unknown: the task stays completed once, with one result and one task.completed', async () => {
  const cut = proxy.cutAtCommitOf('INSERT INTO app.task_results');
  const taskId = await startReport('complete-cut');
  await cut;
  await expectWrittenOnce(taskId);
  // The cut run could not tell whether its completion committed: its job went back to the
  // queue, and the run that took it found the task ended and completed the job. Nothing ran
  // the task again.
  await pollUntil(
    async () =>
      (
        await sql<{ state: string }>(
          stack.db.url,
          `SELECT j.state FROM pgboss.job j JOIN app.tasks t ON t.job_id = j.id WHERE t.id = $1`,
          [taskId],
        )
      )[0]?.state,
    (state) => state === 'completed',
    30_000,
  );
  const again = await eventCounts(taskId);
  expect(again['task.completed']).toBe(1);
  expect(again['task.started']).toBe(1);
  const stored = await sql<{ result: string }>(
    stack.db.url,
    'SELECT result FROM app.task_results WHERE task_id = $1',
    [taskId],
  );
  expect(JSON.stringify(stored[0]!.result)).toContain('complete-cut');
});
