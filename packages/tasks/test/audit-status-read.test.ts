import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { createPool, ROLES, type Pool } from '@mtg/db';
import type { Principal } from '@mtg/identity';
import { createTestDatabase, type TestDatabase } from '../../../test/support/database.ts';
import { auditStatusRead } from '../src/audit-status-read.ts';
import { newTaskId, type TaskRow } from '../src/index.ts';
import { TASK_SELECT } from '../src/task-row.ts';

// The key of "first read after each change of status": the task, the caller (tenant, subject,
// client) and how many times the status changed (counted by a trigger on app.tasks). The
// wires let only the owner read a task (test/e2e/status-read-audit.test.ts drives them); here
// the audit step itself is driven for several callers and several changes.
let db: TestDatabase;
let pool: Pool;
let owner: Pool;
const TASK = newTaskId();

beforeAll(async () => {
  db = await createTestDatabase();
  owner = createPool({ connectionString: db.url, max: 1 });
  pool = createPool({ connectionString: db.logins.gateway, role: ROLES.gateway, max: 2 });
  await owner.query(
    `INSERT INTO app.tasks (id, issuer, tenant, subject, client, scopes, tool, arguments,
       argument_summary, argument_hash, idempotency_key, idempotency_kind, correlation_id,
       deadline, ttl_ms)
     VALUES ($1, 'https://idp.test', 'acme', 'alice', 'agent', '{}', 'generate_report', '{}',
       '{}', 'h', $1, 'explicit', 'c', now() + interval '1 hour', 3600000)`,
    [TASK],
  );
});
afterAll(async () => {
  await pool?.end();
  await owner?.end();
  await db?.drop();
});

const ctx = (subject: string, client: string) => ({
  principal: {
    issuer: 'https://idp.test',
    tenant: 'acme',
    subject,
    client,
    scopes: [],
    expiresAt: 0,
  } satisfies Principal,
  correlationId: `c-${subject}`,
  wire: 'test',
});

const row = async () =>
  (await owner.query<TaskRow>(`SELECT ${TASK_SELECT} FROM app.tasks WHERE id = $1`, [TASK]))
    .rows[0]!;

const reads = async () =>
  (
    await owner.query<{ who: string }>(
      `SELECT subject || '/' || client || ':' || ((body::jsonb) -> 'data' ->> 'status') AS who
         FROM audit.events WHERE task_id = $1 AND type = 'task.status_read' ORDER BY seq`,
      [TASK],
    )
  ).rows.map((r) => r.who);

const readAll = async (policy: 'first-per-change' | 'all' = 'first-per-change') => {
  const seen = await row();
  for (const [subject, client] of [
    ['alice', 'agent'],
    ['ann', 'console'],
    ['ann', 'cli'],
  ] as const) {
    for (let i = 0; i < 3; i++) await auditStatusRead(pool, policy, seen, ctx(subject, client));
  }
};

test('each caller has its own first read of each status, however often it reads', async () => {
  await readAll();
  expect(await reads()).toEqual(['alice/agent:working', 'ann/console:working', 'ann/cli:working']);
  // A change of the status message is no change of status.
  await owner.query(`UPDATE app.tasks SET status_message = 'half way' WHERE id = $1`, [TASK]);
  await readAll();
  expect(await reads()).toHaveLength(3);
});

test('a status that comes back is a change too: working, input_required, working', async () => {
  for (const status of ['input_required', 'working']) {
    await owner.query(`UPDATE app.tasks SET status = $2 WHERE id = $1`, [TASK, status]);
    await readAll();
  }
  expect((await row()).status_version).toBe(2);
  expect((await reads()).slice(3)).toEqual([
    'alice/agent:input_required',
    'ann/console:input_required',
    'ann/cli:input_required',
    'alice/agent:working',
    'ann/console:working',
    'ann/cli:working',
  ]);
});

test('`all` records every read, marks or not', async () => {
  const before = (await reads()).length;
  await readAll('all');
  expect((await reads()).length - before).toBe(9);
});

test('the purge (the worker deletes the task) takes its marks with it', async () => {
  const worker = createPool({ connectionString: db.logins.worker, role: ROLES.worker, max: 1 });
  try {
    await worker.query('DELETE FROM app.tasks WHERE id = $1', [TASK]);
  } finally {
    await worker.end();
  }
  const left = await owner.query('SELECT count(*)::int AS n FROM app.status_read_marks');
  expect(left.rows[0].n).toBe(0);
});
