import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { createPool, ROLES, type Pool } from '@mtg/db';
import type { Principal } from '@mtg/identity';
import { createTestDatabase, type TestDatabase } from '../../../test/support/database.ts';
import { authorizeTask } from '../src/authorize-task.ts';
import { createDenialFold, newTaskId, toView, type TaskRow } from '../src/index.ts';
import { TASK_SELECT, VERB_COLUMNS } from '../src/task-row.ts';

// A verb on one task (a poll above all) reads the task's row at every request: only the
// columns the verbs use (VERB_COLUMNS), never the call's raw arguments, and the caller sees
// exactly what the whole row would have shown.
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
       deadline, ttl_ms, status_message, progress, outcome, ended_by)
     VALUES ($1, 'https://idp.test', 'acme', 'alice', 'agent', '{reports:write}',
       'generate_report', '{"apiKey": "raw-secret", "rows": 3}', '{"rows": 3}', 'h', $1,
       'explicit', 'corr-1', now() + interval '1 hour', 3600000, 'half way',
       '{"current": 1, "total": 2}', 'progress', '{"by": "nobody"}')`,
    [TASK],
  );
});
afterAll(async () => {
  await pool?.end();
  await owner?.end();
  await db?.drop();
});

const principal: Principal = {
  issuer: 'https://idp.test',
  tenant: 'acme',
  subject: 'alice',
  client: 'agent',
  scopes: [],
  expiresAt: 0,
};

test("a verb's row holds the verb columns only, and shows what the whole row shows", async () => {
  const deps = {
    pool,
    denials: createDenialFold({ pool, windowMs: 60_000, onSummaryFailed: () => {} }),
  };
  const ctx = { principal, correlationId: 'c', wire: 'test' };
  const auth = await authorizeTask(deps, TASK, 'get', ctx, () => undefined);
  if (!auth.ok) throw new Error(`refused: ${auth.message}`);
  expect(Object.keys(auth.task).sort()).toEqual(
    [...VERB_COLUMNS, 'worker_lost', 'status_read_marked'].sort(),
  );
  expect(JSON.stringify(auth.task)).not.toContain('raw-secret');
  const whole = (
    await owner.query<TaskRow>(`SELECT ${TASK_SELECT} FROM app.tasks WHERE id = $1`, [TASK])
  ).rows[0]!;
  expect(toView(auth.task)).toEqual(toView(whole));
  expect(toView(auth.task)).toMatchObject({
    statusMessage: 'half way',
    progress: { current: 1, total: 2 },
    arguments: { rows: 3 },
  });
});
