// The console process refuses bad configuration and a database login that could leave
// mtg_console, with a message naming what to fix (exit 2), before it listens.
import { runScript } from '../../packages/audit/test/support/run-script.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

const MAIN = 'apps/console/src/main.ts';
const SESSION_KEY = Buffer.alloc(32, 7).toString('base64');
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(() => db?.drop());

test('without DATABASE_URL it names the variable', async () => {
  const r = await runScript(MAIN, [], { CONSOLE_PORT: '0' });
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(/^console: invalid configuration:[\s\S]*DATABASE_URL/);
});

test('a malformed CONSOLE_METRICS_URLS is named', async () => {
  const r = await runScript(MAIN, [], {
    CONSOLE_PORT: '0',
    DATABASE_URL: db.logins.downstream,
    CONSOLE_METRICS_URLS: 'gateway:3000',
  });
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(/CONSOLE_METRICS_URLS.*gateway:3000 is not name=http/);
});

test('without a session key it names CONSOLE_SESSION_KEY; a key of the wrong size is refused', async () => {
  const none = await runScript(MAIN, [], { CONSOLE_PORT: '0', DATABASE_URL: db.logins.downstream });
  expect(none.code).toBe(2);
  expect(none.stderr).toMatch(/CONSOLE_SESSION_KEY.*is required/);
  const short = await runScript(MAIN, [], {
    CONSOLE_PORT: '0',
    DATABASE_URL: db.logins.downstream,
    CONSOLE_SESSION_KEY: Buffer.alloc(16).toString('base64'),
  });
  expect(short.code).toBe(2);
  expect(short.stderr).toMatch(/CONSOLE_SESSION_KEY.*32-byte key/);
});

test('a superuser login is refused: the console must not be able to become the owner', async () => {
  const r = await runScript(MAIN, [], {
    CONSOLE_PORT: '0',
    DATABASE_URL: db.url,
    CONSOLE_SESSION_KEY: SESSION_KEY,
  });
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(/superuser or can become the database owner/);
});
