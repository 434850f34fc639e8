import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import {
  checkSchemaVersion,
  migrate,
  MigrationChangedError,
  migrationStatus,
  pendingMigrations,
} from '../src/index.ts';
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
    checksumsRecorded: [],
  });
  expect(await migrate(db.url, dir)).toEqual({
    applied: [],
    alreadyApplied: 3,
    checksumsRecorded: [],
  });

  await writeFile(path.join(dir, '003_c.sql'), "INSERT INTO migration_log VALUES ('003_c.sql');");
  expect(await migrate(db.url, dir)).toEqual({
    applied: ['003_c.sql'],
    alreadyApplied: 3,
    checksumsRecorded: [],
  });

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
  expect(await migrate(db.url, dir)).toEqual({
    applied: ['002_broken.sql'],
    alreadyApplied: 2,
    checksumsRecorded: [],
  });
});

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

async function errorOf(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

test('records the sha256 of each file it applies, in the version row', async () => {
  await writeCountingMigrations('001_a.sql');
  await migrate(db.url, dir);

  expect(await query('SELECT version, checksum FROM schema_migrations ORDER BY version')).toEqual([
    { version: '000_log.sql', checksum: sha256('CREATE TABLE migration_log (file text);') },
    { version: '001_a.sql', checksum: sha256("INSERT INTO migration_log VALUES ('001_a.sql');") },
  ]);
});

test('an applied migration edited since stops migrate before it applies anything, naming the file', async () => {
  await writeCountingMigrations('001_a.sql', '002_b.sql');
  await migrate(db.url, dir);
  await writeFile(path.join(dir, '001_a.sql'), "INSERT INTO migration_log VALUES ('edited');");
  await writeFile(path.join(dir, '003_c.sql'), "INSERT INTO migration_log VALUES ('003_c.sql');");

  const error = await errorOf(migrate(db.url, dir));
  expect(error).toBeInstanceOf(MigrationChangedError);
  expect(error).toMatchObject({ code: 'migration_checksum_mismatch', changed: ['001_a.sql'] });
  expect((error as Error).message).toMatch(/^migration 001_a\.sql changed since it was applied/);
  expect(await appliedVersions()).toEqual(['000_log.sql', '001_a.sql', '002_b.sql']);
  // The dry run and the start check of every app say the same.
  await expect(pendingMigrations(db.url, dir)).rejects.toMatchObject({ changed: ['001_a.sql'] });
  await expect(checkSchemaVersion(db.url, dir)).rejects.toMatchObject({
    code: 'migration_checksum_mismatch',
    changed: ['001_a.sql'],
  });
});

test("a database migrated before checksums existed gets each file's checksum on the next run, then is checked like any other", async () => {
  await writeCountingMigrations('001_a.sql');
  // What a release before checksums left: the version table without the column.
  await query(`CREATE TABLE migration_log (file text);
    INSERT INTO migration_log VALUES ('001_a.sql');
    CREATE TABLE public.schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());
    INSERT INTO public.schema_migrations (version) VALUES ('000_log.sql'), ('001_a.sql');`);
  // The apps of this release start on it: no checksum recorded is not a mismatch.
  await expect(checkSchemaVersion(db.url, dir)).resolves.toBeUndefined();
  expect((await migrationStatus(db.url, dir)).map((e) => e.checksum)).toEqual([
    'unrecorded',
    'unrecorded',
  ]);

  await writeFile(path.join(dir, '002_b.sql'), "INSERT INTO migration_log VALUES ('002_b.sql');");
  expect(await migrate(db.url, dir)).toEqual({
    applied: ['002_b.sql'],
    alreadyApplied: 2,
    checksumsRecorded: ['000_log.sql', '001_a.sql'],
  });
  expect((await migrationStatus(db.url, dir)).map((e) => [e.version, e.checksum])).toEqual([
    ['000_log.sql', 'ok'],
    ['001_a.sql', 'ok'],
    ['002_b.sql', 'ok'],
  ]);
  await writeFile(path.join(dir, '001_a.sql'), 'SELECT 1;');
  await expect(checkSchemaVersion(db.url, dir)).rejects.toBeInstanceOf(MigrationChangedError);
});

test('status names each migration applied or pending, when, and whether its file is the one applied', async () => {
  expect(await migrationStatus(db.url, dir)).toEqual([]); // no version table yet: nothing fails
  await writeCountingMigrations('001_a.sql', '002_b.sql');
  await migrate(db.url, dir);
  await query("UPDATE schema_migrations SET checksum = NULL WHERE version = '001_a.sql'");
  await query("INSERT INTO schema_migrations (version, checksum) VALUES ('009_newer.sql', 'x')");
  await writeFile(path.join(dir, '002_b.sql'), 'SELECT 2;');
  await writeFile(path.join(dir, '003_c.sql'), 'SELECT 3;');

  const status = await migrationStatus(db.url, dir);
  expect(status.map(({ version, state, checksum }) => ({ version, state, checksum }))).toEqual([
    { version: '000_log.sql', state: 'applied', checksum: 'ok' },
    { version: '001_a.sql', state: 'applied', checksum: 'unrecorded' },
    { version: '002_b.sql', state: 'applied', checksum: 'changed' },
    { version: '003_c.sql', state: 'pending', checksum: null },
    { version: '009_newer.sql', state: 'not_in_release', checksum: null },
  ]);
  expect(status[0]!.appliedAt).toBeInstanceOf(Date);
  expect(status[3]!.appliedAt).toBeNull();
});

test('the dry run returns the pending files with their SQL and applies nothing', async () => {
  await writeCountingMigrations('001_a.sql');
  const fresh = await pendingMigrations(db.url, dir);
  expect(fresh.map((f) => f.version)).toEqual(['000_log.sql', '001_a.sql']);
  expect(await query("SELECT to_regclass('public.schema_migrations') AS t")).toEqual([{ t: null }]);

  await migrate(db.url, dir);
  await writeFile(path.join(dir, '002_b.sql'), 'CREATE TABLE dry (id int);');
  expect(await pendingMigrations(db.url, dir)).toEqual([
    {
      version: '002_b.sql',
      sql: 'CREATE TABLE dry (id int);',
      checksum: sha256('CREATE TABLE dry (id int);'),
    },
  ]);
  expect(await query("SELECT to_regclass('public.dry') AS t")).toEqual([{ t: null }]);
  expect(await appliedVersions()).toEqual(['000_log.sql', '001_a.sql']);
});
