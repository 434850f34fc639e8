import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../packages/db/src/index.ts';

/** Handle shared with global-teardown.ts (jest runs both in its main process). */
export const EMBEDDED_HANDLE = Symbol.for('mtg.test.embeddedPostgres');

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/**
 * jest globalSetup: provides TEST_ADMIN_DATABASE_URL, a superuser URL on which tests create
 * their own databases. DATABASE_URL when set (CI), else an embedded cluster kept apart from
 * the dev stack's, in `<DATA_DIR>/test-postgres`.
 */
export default async function globalSetup(): Promise<void> {
  if (process.env.DATABASE_URL) {
    process.env.TEST_ADMIN_DATABASE_URL = process.env.DATABASE_URL;
    return;
  }
  const dataRoot = path.resolve(process.env.DATA_DIR ?? path.join(repoRoot, '.data'));
  const started = Date.now();
  const postgres = await startEmbeddedPostgres({
    dataDir: path.join(dataRoot, 'test-postgres'),
    // Test data is disposable: skip the disk flushes that durability needs.
    settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' },
  });
  (globalThis as Record<symbol, unknown>)[EMBEDDED_HANDLE] = postgres;
  process.env.TEST_ADMIN_DATABASE_URL = postgres.url;
  process.stderr.write(
    `\ntest database: embedded PostgreSQL on port ${postgres.port} (${Date.now() - started} ms)\n`,
  );
}
