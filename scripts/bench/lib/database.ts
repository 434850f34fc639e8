// A throw-away database for one bench or chaos run: created on the test server
// (TEST_ADMIN_DATABASE_URL, else the machine's PostgreSQL), migrated, job queue installed,
// dropped afterwards.
import { createLogger } from '@mtg/log';
import { createTestDatabase, type TestDatabase } from '../../../test/support/database.ts';
import { prepareDatabase } from '../../../apps/cli/src/launcher/prepare-database.ts';
import { generateDatabasePasswords } from '@mtg/dev-secrets';
import {
  provisionDatabaseLogins,
  STACK_LOGIN_PREFIX,
  type DatabaseUrls,
} from '../../../apps/cli/src/launcher/database-logins.ts';

export const MACHINE_POSTGRES = 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * A fresh migrated database with the pg-boss schema and task queue, ready for the apps,
 * which connect with its `logins`.
 */
export async function preparedDatabase(): Promise<TestDatabase> {
  process.env.TEST_ADMIN_DATABASE_URL ??= MACHINE_POSTGRES;
  const db = await createTestDatabase();
  try {
    await prepareDatabase(db.url, createLogger('bench', { silent: true }));
  } catch (error) {
    await db.drop().catch(() => {});
    throw error;
  }
  return db;
}

/**
 * Migrates and installs the queue on an existing database (e.g. an embedded cluster's) and
 * gives it the stack's login roles, with passwords made up for the run: the URLs the
 * processes connect with.
 */
export async function prepareExisting(url: string): Promise<DatabaseUrls> {
  await prepareDatabase(url, createLogger('bench', { silent: true }));
  return provisionDatabaseLogins(url, STACK_LOGIN_PREFIX, generateDatabasePasswords());
}
