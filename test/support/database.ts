import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { migrate, recreateDatabase } from '../../packages/db/src/index.ts';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../db/migrations', import.meta.url));

export interface TestDatabase {
  /** Superuser URL of the new database. */
  url: string;
  name: string;
  drop(): Promise<void>;
}

/** The server tests run against, from jest's globalSetup (test/support/global-setup.ts). */
export function adminDatabaseUrl(): string {
  const url = process.env.TEST_ADMIN_DATABASE_URL;
  if (!url) {
    throw new Error(
      'TEST_ADMIN_DATABASE_URL is unset: run tests through `npm test` (jest globalSetup sets it)',
    );
  }
  return url;
}

/**
 * A fresh, uniquely named database (`mtg_test_<random>`) on the test server, migrated with
 * db/migrations unless `migrate: false`. Each test file gets its own, so files never see
 * each other's rows; drop() removes it.
 */
export async function createTestDatabase(
  options: { migrate?: boolean } = {},
): Promise<TestDatabase> {
  const admin = adminDatabaseUrl();
  const name = `mtg_test_${randomBytes(6).toString('hex')}`;
  const url = await recreateDatabase(admin, name);
  if (options.migrate ?? true) await migrate(url, MIGRATIONS_DIR);
  return {
    url,
    name,
    drop: async () => {
      const client = new pg.Client({ connectionString: admin });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}
