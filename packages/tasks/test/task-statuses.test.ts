import { afterAll, beforeAll, expect, test } from '@jest/globals';
import pg from 'pg';
import { TASK_STATUSES } from '@mtg/tool-kit';
import { createTestDatabase, type TestDatabase } from '../../../test/support/database.ts';

// The task statuses are one list in code (@mtg/tool-kit's TASK_STATUSES; every type and label
// derives from it) and one CHECK constraint in SQL (002_tasks.sql), which cannot import it: a
// migration that adds or drops a status without the list, or the other way round, fails here.
// The constraint is read back from a migrated database, as PostgreSQL holds it, not from the
// migration's text, so a later ALTER of it counts too.
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

test('app.tasks.status accepts exactly TASK_STATUSES', async () => {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    // The CHECKs on the status column alone (terminal_has_end, on two columns, is not one).
    const { rows } = await client.query<{ name: string; def: string }>(
      `SELECT c.conname AS name, pg_get_constraintdef(c.oid) AS def
         FROM pg_constraint c
         JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attname = 'status'
        WHERE c.conrelid = 'app.tasks'::regclass AND c.contype = 'c' AND c.conkey = ARRAY[a.attnum]`,
    );
    expect(rows).toHaveLength(1);
    const def = rows[0]!.def;
    // e.g. CHECK ((status = ANY (ARRAY['working'::text, 'input_required'::text, ...])))
    expect(def).toMatch(/^CHECK \(\(status = ANY \(ARRAY\[('[a-z_]+'::text(, )?)+\]\)\)\)$/);
    const allowed = [...def.matchAll(/'([a-z_]+)'::text/g)].map((m) => m[1]);
    expect([...allowed].sort()).toEqual([...TASK_STATUSES].sort());
  } finally {
    await client.end();
  }
});
