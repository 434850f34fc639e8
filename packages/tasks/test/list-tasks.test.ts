import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { createPool, ROLES, type Pool } from '@mtg/db';
import type { Principal } from '@mtg/identity';
import type { LongToolDefinition } from '@mtg/tools';
import { createTestDatabase, type TestDatabase } from '../../../test/support/database.ts';
import { createTaskService, newTaskId, type TaskService } from '../src/index.ts';

// Only what the list verb reads of a long tool: its name and its scope.
const TOOLS = new Map(
  [
    { name: 'generate_report', scope: 'reports:run' },
    { name: 'bulk_update_records', scope: 'records:write' },
  ].map((t) => [t.name, t as unknown as LongToolDefinition]),
);

let db: TestDatabase;
let pool: Pool;
let service: TaskService;
const owner = { issuer: 'https://idp.test', tenant: 'acme', subject: 'alice', client: 'agent' };
const principal = (scopes: string[]): Principal => ({ ...owner, scopes, expiresAt: 0 });
const ctx = (scopes: string[]) => ({ principal: principal(scopes), correlationId: 'c', wire: 't' });
/** Task ids by tool, newest first, as the list must return them. */
const created: Array<{ id: string; tool: string }> = [];

beforeAll(async () => {
  db = await createTestDatabase();
  pool = createPool({ connectionString: db.url, role: ROLES.gateway, max: 2 });
  // The list verb needs nothing of the service but the pool and the tools it was built with.
  service = createTaskService({ pool, tools: TOOLS } as never);
  // Interleaved, so a filter applied after the page cut would leave short or empty pages.
  const tools = ['bulk_update_records', 'generate_report', 'bulk_update_records'];
  for (let i = 0; i < 15; i++) {
    const id = newTaskId();
    const tool = tools[i % tools.length]!;
    await pool.query(
      `INSERT INTO app.tasks (id, issuer, tenant, subject, client, scopes, tool, arguments,
         argument_summary, argument_hash, idempotency_key, idempotency_kind, correlation_id,
         created_at, deadline, ttl_ms)
       VALUES ($1, $2, $3, $4, $5, '{}', $6, '{}', '{}', 'h', $1, 'explicit', 'c',
         now() - make_interval(secs => 100 - $7::int), now() + interval '1 hour', 3600000)`,
      [id, owner.issuer, owner.tenant, owner.subject, owner.client, tool, i],
    );
    created.unshift({ id, tool });
  }
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

async function listAll(scopes: string[], limit: number) {
  const pages: string[][] = [];
  let cursor: string | undefined;
  do {
    const r = await service.list(ctx(scopes), { limit, ...(cursor ? { cursor } : {}) });
    if (!r.ok) throw new Error(r.message);
    pages.push(r.tasks.map((t) => t.taskId));
    cursor = r.nextCursor;
  } while (cursor && pages.length < 50);
  return pages;
}

test('a token narrowed to one tool’s scope lists only that tool’s tasks, in full pages', async () => {
  const reports = created.filter((t) => t.tool === 'generate_report').map((t) => t.id);
  expect(reports).toHaveLength(5);
  expect(await listAll(['reports:run'], 2)).toEqual([
    reports.slice(0, 2),
    reports.slice(2, 4),
    reports.slice(4),
  ]);
  const records = created.filter((t) => t.tool === 'bulk_update_records').map((t) => t.id);
  expect((await listAll(['records:write'], 4)).flat()).toEqual(records);
});

test('a token with every tool scope lists every task; one with none lists none', async () => {
  expect((await listAll(['reports:run', 'records:write'], 4)).flat()).toEqual(
    created.map((t) => t.id),
  );
  expect(await listAll(['env:provision'], 4)).toEqual([[]]);
});
