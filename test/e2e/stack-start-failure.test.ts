import { sql } from '../support/sql.ts';
import { startStack } from '../support/stack.ts';

const admin = () => process.env.TEST_ADMIN_DATABASE_URL!;
const testDatabases = async () =>
  (await sql(admin(), `SELECT datname FROM pg_database WHERE datname LIKE 'mtg_test_%'`)).map(
    (r) => r.datname as string,
  );

// A stack whose gateway cannot start (its configuration is refused after the IdP and the
// downstream are up) undoes what had started: its database is dropped and no server stays
// open (jest's own open-handle wait would otherwise hang the run).
// Servers open in this process: other files run in it before this one (runInBand), so what
// counts is what the failed start adds.
const servers = () =>
  (process as unknown as { _getActiveHandles(): unknown[] })
    ._getActiveHandles()
    .filter((h) => (h as object | null)?.constructor?.name === 'Server');

test('a stack that fails to start leaves no database and no server behind', async () => {
  const before = await testDatabases();
  const serversBefore = servers();
  await expect(startStack({ env: { WORKER_LEASE_MS: 'soon' } })).rejects.toThrow(/WORKER_LEASE_MS/);
  const after = await testDatabases();
  expect(after.filter((d) => !before.includes(d))).toEqual([]);
  expect(servers().filter((h) => !serversBefore.includes(h))).toEqual([]);
});
