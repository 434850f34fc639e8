import { rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  EmbeddedPostgresError,
  startEmbeddedPostgres,
  type EmbeddedPostgres,
} from '@mtg/dev-postgres';

/** What global-teardown.ts must undo (jest runs both in its main process). */
export const EMBEDDED_HANDLE = Symbol.for('mtg.test.embeddedPostgres');
export interface EmbeddedTestCluster {
  postgres: EmbeddedPostgres;
  /** Set for a throw-away cluster, deleted at teardown. */
  removeDir?: string;
}

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
// Test data is disposable: skip the disk flushes that durability needs.
const settings = { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' };

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
  let cluster: EmbeddedTestCluster;
  try {
    cluster = {
      postgres: await startEmbeddedPostgres({
        dataDir: path.join(dataRoot, 'test-postgres'),
        settings,
      }),
    };
  } catch (error) {
    if (!(error instanceof EmbeddedPostgresError && error.code === 'cluster_in_use')) throw error;
    // Another test run holds the shared cluster: use a cluster of our own for this run.
    const dir = path.join(dataRoot, `test-postgres-${process.pid}`);
    cluster = { postgres: await startEmbeddedPostgres({ dataDir: dir, settings }), removeDir: dir };
  }
  (globalThis as Record<symbol, unknown>)[EMBEDDED_HANDLE] = cluster;
  process.env.TEST_ADMIN_DATABASE_URL = cluster.postgres.url;
  process.stderr.write(
    `\ntest database: embedded PostgreSQL on port ${cluster.postgres.port} ` +
      `(${Date.now() - started} ms${cluster.removeDir ? ', own cluster: the shared one is busy' : ''})\n`,
  );
}

export async function removeClusterDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}
