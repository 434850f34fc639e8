// `npm run migrate -- status | --dry-run` and the checksum guard as an operator meets them:
// the real CLI on a real database, and an app refusing to start on an edited migration.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { runMain } from '../support/run-main.ts';
import { sql } from '../support/sql.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  await db?.drop();
});

function runScript(
  script: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [script, ...args], {
      cwd: root,
      env: { PATH: process.env.PATH, DATABASE_URL: db.url, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    // 'close', not 'exit': the child can exit with the tail of its output still in the pipe
    // (the dry run prints more than a pipe holds), and 'exit' would cut it off.
    child.on('close', (code) => resolve({ code, out, err }));
  });
}
const migrateCli = (...args: string[]) => runScript('scripts/migrate.ts', args);

test('the dry run prints the SQL of every pending migration and applies nothing', async () => {
  const { code, out } = await migrateCli('--dry-run');
  expect(code).toBe(0);
  expect(out).toMatch(/^-- 001_roles_and_schemas\.sql \(sha256 [0-9a-f]{64}\)\n/);
  expect(out).toContain('CREATE TABLE app.tasks');
  expect(out).toMatch(/dry run, nothing applied: \d+ migration\(s\) pending \(001_roles/);
  const [t] = await sql(db.url, "SELECT to_regclass('public.schema_migrations') AS t");
  expect(t.t).toBeNull();
});

test('after migrate, status lists every migration applied with its checksum ok and exits 0', async () => {
  expect((await migrateCli()).code).toBe(0);
  const { code, out } = await migrateCli('status');
  expect(code).toBe(0);
  const lines = out.trimEnd().split('\n');
  expect(lines[0]).toMatch(
    /^001_roles_and_schemas\.sql\s+applied\s+\d{4}-\d\d-\d\dT[\d:.]+Z\s+checksum ok$/,
  );
  expect(lines.at(-1)).toMatch(
    /: (\d+) applied \(checksum ok \1, changed 0, unrecorded 0\), 0 pending$/,
  );
  expect((await migrateCli('--dry-run')).out).toContain('0 migration(s) pending');
});

test('an applied migration whose file no longer matches: status exits 1, migrate and the apps stop with 2, naming it', async () => {
  // What editing 002_tasks.sql after it was applied looks like from the database's side.
  await sql(
    db.url,
    `UPDATE public.schema_migrations SET checksum = repeat('0', 64) WHERE version = '002_tasks.sql'`,
  );
  const status = await migrateCli('status');
  expect(status.code).toBe(1);
  expect(status.out).toMatch(/^002_tasks\.sql\s+applied\s+\S+\s+checksum changed$/m);
  expect(status.err).toContain('migration 002_tasks.sql changed since it was applied');

  const run = await migrateCli();
  expect(run.code).toBe(2);
  expect(run.err).toContain('migration 002_tasks.sql changed since it was applied');
  expect((await migrateCli('--dry-run')).code).toBe(2);

  // The init container does not wait for what waiting cannot mend.
  const wait = await runScript('scripts/wait-for-migrations.ts', [], {
    WAIT_TIMEOUT_SECONDS: '5',
  });
  expect(wait.code).toBe(2);
  expect(wait.err).toContain('wait-for-migrations: migration 002_tasks.sql changed');

  for (const app of ['gateway', 'worker'] as const) {
    const started = await runMain(app, { DATABASE_URL: db.url });
    expect(started.code).toBe(2);
    expect(started.stderr).toContain(
      `${app}: migration 002_tasks.sql changed since it was applied`,
    );
  }
});

test('unknown arguments are refused with the usage', async () => {
  const { code, err } = await migrateCli('stauts');
  expect(code).toBe(2);
  expect(err).toContain('usage: migrate [status | --dry-run]');
});
