import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../../../../test/support/database.ts';

// Every index of app.tasks costs every task an entry on each write that is not HOT (the
// start's insert, the claim, the ending), so each one is here for a statement that reads
// through it. An index added without a reader, or one left behind when its reader moved to
// another (tasks_purge, migration 240), fails this list.
const READ_BY: Record<string, string> = {
  tasks_pkey: 'every statement of a run, by task id (NOT_ENDED)',
  tasks_dedupe: "the start's INSERT … ON CONFLICT on the idempotency slot",
  tasks_owner: 'tasks/list, newest first per owner',
  tasks_active_tenant: "a revocation's flagging of the principal's active tasks",
  tasks_deadline: "the maintenance sweep's deadline read",
  tasks_leased: "the maintenance sweep's lease reaper",
  tasks_purge_at: 'the retention purge',
};

let db: TestDatabase;
let admin: pg.Client;

beforeAll(async () => {
  db = await createTestDatabase();
  admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
});

afterAll(async () => {
  await admin.end();
  await db.drop();
});

test('app.tasks carries only indexes that a statement reads', async () => {
  const { rows } = await admin.query<{ indexname: string }>(
    `SELECT indexname FROM pg_indexes WHERE schemaname = 'app' AND tablename = 'tasks'
      ORDER BY indexname`,
  );
  expect(rows.map((r) => r.indexname)).toEqual(Object.keys(READ_BY).sort());
});
