// What an auditor asks, answered from the views with the mtg_auditor role, over events the
// real product wrote (plus a principal revocation, written the way the identity code
// writes it). The queries are the ones docs/audit.md gives.
import pg from 'pg';
import { appendAuditInTransaction } from '@mtg/audit';
import { pollUntil } from '../support/poll.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire } from '../support/wires.ts';

let stack: Stack;
let auditor: pg.Client;
let taskId: string;
let lateTask: string;

const wire = () => jobToolsWire(stack.mcpUrl);
const finished = (token: string, id: string) =>
  pollUntil(
    () => wire().get(token, id),
    (a) => a.ok && a.value.status !== 'working',
  );

beforeAll(async () => {
  stack = await startStack({ workers: 1, env: { DEMO_STEP_MS: '50' } });
  const nia = await stack.token('nia', 'acme');
  taskId = await wire().start(nia, 'generate_report', { report: 'quarterly' });
  await finished(nia, taskId);
  await wire().result(nia, taskId);
  // Two strangers try the task: same tenant, and an administrator of another tenant.
  await wire().get(await stack.token('bob', 'acme'), taskId);
  await wire().cancel(
    await stack.token('root', 'globex', { scope: 'tasks:admin records:write' }),
    taskId,
  );

  // The identity provider disables nia (as packages/tasks' revocation records it) …
  const gateway = new pg.Client({ connectionString: stack.db.url, options: '-c role=mtg_gateway' });
  await gateway.connect();
  await appendAuditInTransaction(gateway, {
    type: 'principal.revoked',
    tenant: 'acme',
    subject: 'nia',
    reason: 'ssf:account-disabled',
    actor: { subject: 'ssf:account-disabled', kind: 'system' },
    data: { openTasks: [] },
  });
  await gateway.end();
  // … and a task of hers runs anyway: what the auditor's third question must find.
  lateTask = await wire().start(nia, 'generate_report', { report: 'after-disable' });
  await finished(nia, lateTask);

  auditor = new pg.Client({ connectionString: stack.db.url, options: '-c role=mtg_auditor' });
  await auditor.connect();
});

afterAll(async () => {
  await auditor?.end();
  await stack?.close();
});

test('who asked for this task?', async () => {
  const { rows } = await auditor.query(
    `SELECT tenant, subject, client, occurred_at, correlation_id, data->'arguments' AS arguments
       FROM audit.task_timeline
      WHERE task_id = $1 AND type = 'task.created'`,
    [taskId],
  );
  expect(rows).toEqual([
    expect.objectContaining({
      tenant: 'acme',
      subject: 'nia',
      client: 'mcp-agent',
      arguments: expect.objectContaining({ report: 'quarterly' }),
    }),
  ]);
});

test('a task’s timeline, in chain order, with who acted', async () => {
  const { rows } = await auditor.query(
    `SELECT seq, type, actor_kind, actor_subject, reason, data
       FROM audit.task_timeline WHERE task_id = $1 ORDER BY seq`,
    [taskId],
  );
  const types = rows.map((r) => r.type).filter((t) => t !== 'task.status_read');
  expect(types[0]).toBe('task.created');
  expect(types).toEqual(
    expect.arrayContaining(['task.started', 'task.completed', 'task.result_read', 'task.denied']),
  );
  expect(types.indexOf('task.started')).toBeLessThan(types.indexOf('task.completed'));
  expect(rows.find((r) => r.type === 'task.started')).toMatchObject({ actor_kind: 'worker' });
});

test('every denial for tenant acme in the last week', async () => {
  const { rows } = await auditor.query(
    `SELECT occurred_at, type, subject, client, verb, reason, task_id
       FROM audit.denials
      WHERE tenant = $1 AND occurred_at >= now() - interval '7 days'
      ORDER BY seq`,
    ['acme'],
  );
  expect(rows).toEqual(
    expect.arrayContaining([
      expect.objectContaining({ subject: 'bob', verb: 'get', reason: expect.any(String) }),
    ]),
  );
  expect(rows.every((r) => r.type === 'task.denied' || r.type === 'auth.denied')).toBe(true);
  const globex = await auditor.query(
    `SELECT subject, reason FROM audit.denials WHERE tenant = 'globex'`,
  );
  // globex's own trail cannot tell acme's task from a missing one; the whole trail can, in a
  // system event (no tenant).
  expect(globex.rows).toEqual(
    expect.arrayContaining([expect.objectContaining({ subject: 'root', reason: 'unknown_task' })]),
  );
  expect(globex.rows.map((r) => r.reason)).not.toContain('cross_tenant');
  const system = await auditor.query(
    `SELECT subject, reason FROM audit.denials WHERE tenant IS NULL AND reason = 'cross_tenant'`,
  );
  expect(system.rows).toEqual([{ subject: 'root', reason: 'cross_tenant' }]);
});

test('which tasks ran for a user after they were disabled?', async () => {
  const { rows } = await auditor.query(
    `SELECT DISTINCT ON (t.task_id) t.task_id, t.tool, r.occurred_at AS revoked_at,
            t.type AS first_activity, t.occurred_at
       FROM audit.identity_changes r
       JOIN audit.task_timeline t
         ON t.tenant = r.tenant AND t.subject = r.subject AND t.seq > r.seq
      WHERE r.type = 'principal.revoked' AND r.tenant = $1 AND r.subject = $2
        AND t.type IN ('task.created', 'task.started', 'task.lease_taken', 'task.step_completed',
                       'task.completed', 'task.delegated', 'task.identity_refreshed')
        AND NOT EXISTS (
          SELECT 1 FROM audit.identity_changes x
           WHERE x.type = 'principal.restored' AND x.tenant = r.tenant AND x.subject = r.subject
             AND x.seq > r.seq AND x.seq < t.seq)
      ORDER BY t.task_id, t.seq`,
    ['acme', 'nia'],
  );
  expect(rows.map((r) => r.task_id)).toEqual([lateTask]);
  expect(rows[0]).toMatchObject({ tool: 'generate_report', first_activity: 'task.created' });
});

test('identity changes and a principal’s activity, as subject and as actor', async () => {
  const changes = await auditor.query(
    `SELECT type, tenant, subject, reason FROM audit.identity_changes ORDER BY seq`,
  );
  expect(changes.rows).toContainEqual({
    type: 'principal.revoked',
    tenant: 'acme',
    subject: 'nia',
    reason: 'ssf:account-disabled',
  });

  const nia = await auditor.query(
    `SELECT role, type, task_id FROM audit.principal_activity WHERE tenant = 'acme' AND principal = 'nia' ORDER BY seq`,
  );
  expect(nia.rows.map((r) => r.type)).toEqual(
    expect.arrayContaining(['task.created', 'task.result_read', 'principal.revoked']),
  );
  expect(nia.rows.every((r) => r.role === 'subject')).toBe(true);

  const worker = await auditor.query(
    `SELECT DISTINCT type FROM audit.principal_activity WHERE tenant = 'acme' AND principal = $1 AND role = 'actor'`,
    ['test-worker-1'],
  );
  expect(worker.rows.map((r) => r.type)).toContain('task.started');
});

test('the auditors’ filters are served by indexes, not by scanning every event', async () => {
  await auditor.query('BEGIN');
  try {
    await auditor.query('SET LOCAL enable_seqscan = off');
    for (const query of [
      `SELECT * FROM audit.task_timeline WHERE task_id = 'x' ORDER BY seq`,
      `SELECT * FROM audit.denials WHERE tenant = 'acme' AND occurred_at >= now() - interval '7 days'`,
      `SELECT * FROM audit.identity_changes WHERE tenant = 'acme' AND subject = 'nia'`,
      `SELECT * FROM audit.principal_activity WHERE tenant = 'acme' AND principal = 'nia' ORDER BY seq`,
    ]) {
      const plan = (await auditor.query(`EXPLAIN ${query}`)).rows
        .map((r) => r['QUERY PLAN'])
        .join('\n');
      expect(plan).not.toMatch(/Seq Scan/);
    }
  } finally {
    await auditor.query('ROLLBACK');
  }
});
