import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { migrate } from '../src/index.ts';
import {
  createTestDatabase,
  MIGRATIONS_DIR,
  type TestDatabase,
} from '../../../test/support/database.ts';

let dir: string;
let db: TestDatabase;

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'mtg-migrations-'));
  db = await createTestDatabase({ migrate: false });
});

afterEach(async () => {
  await db.drop();
  await rm(dir, { recursive: true, force: true });
});

async function query<R extends pg.QueryResultRow>(sql: string): Promise<R[]> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    return (await client.query<R>(sql)).rows;
  } finally {
    await client.end();
  }
}

const appliedVersions = async () =>
  (await query<{ version: string }>('SELECT version FROM schema_migrations ORDER BY version')).map(
    (r) => r.version,
  );

// Each file appends a row, so a file applied twice would leave two rows.
async function writeCountingMigrations(...names: string[]) {
  await writeFile(path.join(dir, '000_log.sql'), 'CREATE TABLE migration_log (file text);');
  for (const name of names) {
    await writeFile(path.join(dir, name), `INSERT INTO migration_log VALUES ('${name}');`);
  }
}

test('applies each file once, in order, and only new files on later runs', async () => {
  await writeCountingMigrations('001_a.sql', '002_b.sql');
  await writeFile(path.join(dir, 'README.md'), 'not a migration');

  expect(await migrate(db.url, dir)).toEqual({
    applied: ['000_log.sql', '001_a.sql', '002_b.sql'],
    alreadyApplied: 0,
  });
  expect(await migrate(db.url, dir)).toEqual({ applied: [], alreadyApplied: 3 });

  await writeFile(path.join(dir, '003_c.sql'), "INSERT INTO migration_log VALUES ('003_c.sql');");
  expect(await migrate(db.url, dir)).toEqual({ applied: ['003_c.sql'], alreadyApplied: 3 });

  expect(await query('SELECT file FROM migration_log ORDER BY file')).toEqual([
    { file: '001_a.sql' },
    { file: '002_b.sql' },
    { file: '003_c.sql' },
  ]);
});

test('two concurrent migrators on a fresh database both succeed and apply each file exactly once', async () => {
  await writeCountingMigrations('001_a.sql', '002_b.sql', '003_c.sql');

  const results = await Promise.all([migrate(db.url, dir), migrate(db.url, dir)]);

  const applied = results.flatMap((r) => r.applied).sort();
  expect(applied).toEqual(['000_log.sql', '001_a.sql', '002_b.sql', '003_c.sql']);
  expect(await query('SELECT file FROM migration_log ORDER BY file')).toEqual([
    { file: '001_a.sql' },
    { file: '002_b.sql' },
    { file: '003_c.sql' },
  ]);
});

test("two concurrent migrators apply the project's own migrations once", async () => {
  const results = await Promise.all([
    migrate(db.url, MIGRATIONS_DIR),
    migrate(db.url, MIGRATIONS_DIR),
  ]);

  const applied = results.flatMap((r) => r.applied);
  expect(new Set(applied).size).toBe(applied.length);
  expect(await appliedVersions()).toEqual([...applied].sort());
});

test('a failing migration rolls back entirely, names its file, and runs again once fixed', async () => {
  await writeCountingMigrations('001_a.sql');
  await writeFile(
    path.join(dir, '002_broken.sql'),
    'CREATE TABLE half_done (id int);\nINSERT INTO no_such_table VALUES (1);',
  );

  await expect(migrate(db.url, dir)).rejects.toThrow(
    /migration 002_broken\.sql failed: relation "no_such_table" does not exist/,
  );

  expect(await appliedVersions()).toEqual(['000_log.sql', '001_a.sql']);
  expect(await query("SELECT to_regclass('public.half_done') AS t")).toEqual([{ t: null }]);

  await writeFile(path.join(dir, '002_broken.sql'), 'CREATE TABLE half_done (id int);');
  expect(await migrate(db.url, dir)).toEqual({ applied: ['002_broken.sql'], alreadyApplied: 2 });
});
