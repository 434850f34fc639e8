import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { dropLoginRoles, migrate, MIGRATIONS_DIR, recreateDatabase } from '@mtg/db';
import { DATABASE_SERVICES, generateDatabasePasswords } from '@mtg/dev-secrets';
import {
  loginRoleName,
  provisionDatabaseLogins,
  type DatabaseUrls,
} from '../../apps/cli/src/launcher/database-logins.ts';

export { MIGRATIONS_DIR };

export interface TestDatabase {
  /**
   * Superuser URL of the new database: for migrations, the queue and a test's own checks;
   * never given to the product's processes.
   */
  url: string;
  /**
   * What the gateway, the workers and the downstream connect with: LOGIN roles of this
   * database alone (`<name>_gateway` …), each a member of its group role only, with
   * passwords made up for the run. Only for a migrated database.
   */
  logins: DatabaseUrls;
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
  options: {
    migrate?: boolean;
    /** Another server than the test cluster (a superuser URL), e.g. a second cluster. */
    adminUrl?: string;
  } = {},
): Promise<TestDatabase> {
  const admin = options.adminUrl ?? adminDatabaseUrl();
  const name = `mtg_test_${randomBytes(6).toString('hex')}`;
  const url = await recreateDatabase(admin, name);
  const migrated = options.migrate ?? true;
  let logins: DatabaseUrls | undefined;
  if (migrated) {
    await migrate(url, MIGRATIONS_DIR);
    // Roles are cluster-wide: named after the database, so files never share them.
    logins = await provisionDatabaseLogins(url, name, generateDatabasePasswords());
  }
  return {
    url,
    get logins(): DatabaseUrls {
      if (!logins) throw new Error(`test database ${name} was created unmigrated: no logins`);
      return logins;
    },
    name,
    drop: async () => {
      const client = new pg.Client({ connectionString: admin });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
      } finally {
        await client.end();
      }
      if (logins) {
        await dropLoginRoles(
          admin,
          DATABASE_SERVICES.map((s) => loginRoleName(name, s)),
        );
      }
    },
  };
}
