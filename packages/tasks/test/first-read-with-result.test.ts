import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { verifyAuditTrail } from '@mtg/audit';
import { createPool, ROLES, type Pool } from '@mtg/db';
import type { Principal } from '@mtg/identity';
import { createTestDatabase, type TestDatabase } from '../../../test/support/database.ts';
import { statusReadEvent } from '../src/audit-status-read.ts';
import { newTaskId, type TaskRow } from '../src/index.ts';
import { firstReadWithResult } from '../src/first-read-with-result.ts';
import { TASK_SELECT } from '../src/task-row.ts';

// A caller's first read of a completed task with its result, on the primary: the mark with
// `task.status_read`, the result and `task.result_read` in one statement. The 2026 wire drives
// it in test/e2e/results-and-audit.test.ts and status-read-audit.test.ts; here each branch of
// the statement, against the real schema and audit chain.
let db: TestDatabase;
let pool: Pool;
let owner: Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  owner = createPool({ connectionString: db.url, max: 1 });
  pool = createPool({ connectionString: db.logins.gateway, role: ROLES.gateway, max: 2 });
});
afterAll(async () => {
  await pool?.end();
  await owner?.end();
  await db?.drop();
});

const principal = {
  issuer: 'https://idp.test',
  tenant: 'acme',
  subject: 'alice',
  client: 'agent',
  scopes: [],
  expiresAt: 0,
} satisfies Principal;
const ctx = { principal, correlationId: 'c-1', wire: 'test' };

/** A completed task with a stored result of `text`. */
async function completed(deleteOnRead: boolean): Promise<TaskRow> {
  const id = newTaskId();
  await owner.query(
    `INSERT INTO app.tasks (id, issuer, tenant, subject, client, scopes, tool, arguments,
       argument_summary, argument_hash, idempotency_key, idempotency_kind, correlation_id,
       deadline, ttl_ms, status, outcome, ended_at)
     VALUES ($1, 'https://idp.test', 'acme', 'alice', 'agent', '{}', 'generate_report', '{}',
       '{}', 'h', $1, 'explicit', 'c', now() + interval '1 hour', 3600000, 'completed',
       'completed', now())`,
    [id],
  );
  await owner.query(
    `INSERT INTO app.task_results (task_id, result, is_error, size_bytes, expires_at, delete_on_read)
     VALUES ($1, '{"content":[{"type":"text","text":"done"}]}', false, 42, now() + interval '1 hour', $2)`,
    [id, deleteOnRead],
  );
  return (await owner.query<TaskRow>(`SELECT ${TASK_SELECT} FROM app.tasks WHERE id = $1`, [id]))
    .rows[0]!;
}

const events = async (taskId: string) =>
  (
    await owner.query<{ type: string; data: Record<string, unknown> }>(
      `SELECT type, (body::jsonb) -> 'data' AS data FROM audit.events
        WHERE task_id = $1 ORDER BY seq`,
      [taskId],
    )
  ).rows;

const resultRead = (task: TaskRow) => ({
  type: 'task.result_read' as const,
  taskId: task.id,
  tenant: 'acme',
  subject: 'alice',
  client: 'agent',
  tool: task.tool,
  correlationId: 'c-1',
  data: { wire: 'test', status: task.status },
});

const take = (task: TaskRow) =>
  firstReadWithResult(
    pool,
    task,
    principal,
    statusReadEvent('first-per-change', task, ctx),
    resultRead(task),
  );

test('the first read records its status read, then the result read; a read after the mark only the result read', async () => {
  const task = await completed(false);
  const stored = await take(task);
  expect(stored).toEqual({
    result: { content: [{ type: 'text', text: 'done' }] },
    isError: false,
    sizeBytes: 42,
    deletedOnRead: false,
  });
  expect(await take(task)).toEqual(stored);
  expect(await events(task.id)).toEqual([
    {
      type: 'task.status_read',
      data: { wire: 'test', status: 'completed', recorded: 'first-per-change' },
    },
    {
      type: 'task.result_read',
      data: { wire: 'test', status: 'completed', sizeBytes: 42, deletedOnRead: false },
    },
    {
      type: 'task.result_read',
      data: { wire: 'test', status: 'completed', sizeBytes: 42, deletedOnRead: false },
    },
  ]);
  const marks = await owner.query('SELECT 1 FROM app.status_read_marks WHERE task_id = $1', [
    task.id,
  ]);
  expect(marks.rowCount).toBe(1);
});

test('delete-on-read: one reader takes it; a later read finds none and appends no result read', async () => {
  const task = await completed(true);
  expect(await take(task)).toMatchObject({ sizeBytes: 42, deletedOnRead: true });
  expect(await take(task)).toBeUndefined();
  expect((await events(task.id)).map((e) => e.type)).toEqual([
    'task.status_read',
    'task.result_read',
  ]);
  expect((await events(task.id))[1]!.data).toMatchObject({ deletedOnRead: true });
  const left = await owner.query('SELECT 1 FROM app.task_results WHERE task_id = $1', [task.id]);
  expect(left.rowCount).toBe(0);
});

test('no result stored: the status read is recorded all the same; the chain verifies with the filled-in values', async () => {
  const task = await completed(false);
  await owner.query('DELETE FROM app.task_results WHERE task_id = $1', [task.id]);
  expect(await take(task)).toBeUndefined();
  expect((await events(task.id)).map((e) => e.type)).toEqual(['task.status_read']);
  const client = await owner.connect();
  try {
    expect(await verifyAuditTrail(client)).toMatchObject({ ok: true });
  } finally {
    client.release();
  }
});
