// The gateway and the worker refuse to start on a database that lacks a migration of their
// release, with a message that says so and what to run, before they touch anything else.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { sql } from '../support/sql.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startStack, type Stack } from '../support/stack.ts';

const main = (app: string) =>
  fileURLToPath(new URL(`../../apps/${app}/src/main.ts`, import.meta.url));

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
