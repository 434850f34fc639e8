// The gateway and the worker refuse to start on a database that lacks a migration of their
// release, with a message that says so and what to run, before they touch anything else.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { migrate } from '@mtg/db';
import { sql } from '../support/sql.ts';
import { createTestDatabase, MIGRATIONS_DIR, type TestDatabase } from '../support/database.ts';
import { startStack, type Stack } from '../support/stack.ts';

const main = (app: string) =>
  fileURLToPath(new URL(`../../apps/${app}/src/main.ts`, import.meta.url));
const WAIT = fileURLToPath(new URL('../../scripts/wait-for-migrations.ts', import.meta.url));

let stack: Stack;
let empty: TestDatabase;
let behind: TestDatabase;

beforeAll(async () => {
  stack = await startStack({ workers: 0 });
  empty = await createTestDatabase({ migrate: false });
  behind = await createTestDatabase();
  await sql(behind.url, `DELETE FROM public.schema_migrations WHERE version LIKE '045%'`);
});
afterAll(async () => {
  await stack?.close();
  await empty?.drop();
  await behind?.drop();
});

function run(app: string, databaseUrl: string): Promise<{ code: number | null; stderr: string }> {
  const child = fork(main(app), [], {
    execPath: process.execPath,
    execArgv: [],
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    env: {
      PATH: process.env.PATH,
      ...stack.env,
      GATEWAY_PORT: '0',
      CLIENT_ID: 'mcp-worker',
      CLIENT_SECRET: stack.secrets.clientSecrets['mcp-worker'],
      DATABASE_URL: databaseUrl,
      LOG_LEVEL: 'error',
    },
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => {
    child.once('message', () => {
      child.kill('SIGKILL');
      resolve({ code: -1, stderr: 'started' });
    });
    child.once('exit', (code) => resolve({ code, stderr }));
  });
}

test.each(['gateway', 'worker'])(
  'the %s refuses a database that was never migrated, saying to run the migrations',
  async (app) => {
    const { code, stderr } = await run(app, empty.url);
    expect(code).toBe(2);
    expect(stderr).toContain(`${app}: the database is not migrated for this release`);
    expect(stderr).toContain('npm run migrate');
    expect(stderr).not.toMatch(/\n\s+at /); // a message, not a stack trace
  },
);

test.each(['gateway', 'worker'])(
  'the %s refuses a database one migration behind, naming it',
  async (app) => {
    const { code, stderr } = await run(app, behind.url);
    expect(code).toBe(2);
    expect(stderr).toContain('045_schema_migrations_readable.sql');
  },
);

function waitForMigrations(databaseUrl: string, timeoutSeconds: number) {
  const child = fork(WAIT, [], {
    execPath: process.execPath,
    execArgv: [],
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: databaseUrl,
      WAIT_TIMEOUT_SECONDS: String(timeoutSeconds),
      WAIT_INTERVAL_MS: '100',
    },
  });
  let output = '';
  let seen: (() => void) | undefined;
  const waitingSeen = new Promise<void>((resolve) => (seen = resolve));
  const collect = (d: Buffer) => {
    output += d.toString();
    if (output.includes('waiting:')) seen!();
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const exited = new Promise<{ code: number | null; output: string }>((resolve) =>
    child.once('exit', (code) => resolve({ code, output })),
  );
  return Object.assign(exited, { waitingSeen });
}

test('the init container gives up on a database nobody migrates, saying why', async () => {
  const { code, output } = await waitForMigrations(empty.url, 1);
  expect(code).toBe(1);
  expect(output).toContain('wait-for-migrations: gave up after 1s: the database is not migrated');
});

test('the init container lets the app start once the migrations Job has run', async () => {
  const db = await createTestDatabase({ migrate: false });
  try {
    const waiting = waitForMigrations(db.url, 60);
    await waiting.waitingSeen; // it has found the database empty
    await migrate(db.url, MIGRATIONS_DIR);
    const { code, output } = await waiting;
    expect(code).toBe(0);
    expect(output).toContain('waiting: the database is not migrated');
    expect(output).toContain('the database is migrated for this release');
  } finally {
    await db.drop();
  }
});
