import pg from 'pg';
import { readAppliedMigrations } from './applied-migrations.ts';
import { changedMigrations, MigrationChangedError } from './migration-changed-error.ts';
import { readMigrationFiles } from './migration-files.ts';

export interface MigrateResult {
  applied: string[];
  alreadyApplied: number;
  /** Applied before checksums were recorded: their current file's checksum is now recorded. */
  checksumsRecorded: string[];
}

// Any constant shared by every migrator of this project: two processes starting at once
// serialise on it, and the second sees the first's versions as applied.
const LOCK_KEY = 7_310_042_001;

/**
 * Applies numbered SQL files from `dir` in order, each once, each in its own transaction
 * with its version row (and the file's sha256) written first in the same transaction.
 * Forward-only. Before applying anything it compares every applied file with the checksum
 * recorded for it and stops with MigrationChangedError, naming the files, if one was edited;
 * rows applied before checksums existed get their current file's checksum recorded.
 */
export async function migrate(connectionString: string, dir: string): Promise<MigrateResult> {
  const files = await readMigrationFiles(dir);
  const client = new pg.Client({ connectionString, application_name: 'migrate' });
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [LOCK_KEY]);
    await ensureTable(client);
    const done = await readAppliedMigrations(client);
    const changed = changedMigrations(files, done);
    if (changed.length) throw new MigrationChangedError(changed);

    const checksumsRecorded: string[] = [];
    for (const file of files) {
      if (done.get(file.version)?.checksum !== null) continue;
      await client.query(
        'UPDATE public.schema_migrations SET checksum = $2 WHERE version = $1 AND checksum IS NULL',
        [file.version, file.checksum],
      );
      checksumsRecorded.push(file.version);
    }

    const applied: string[] = [];
    for (const file of files) {
      if (done.has(file.version)) continue;
      await client.query('BEGIN');
      try {
        await client.query(
          'INSERT INTO public.schema_migrations (version, checksum) VALUES ($1, $2)',
          [file.version, file.checksum],
        );
        await client.query(file.sql);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK');
        const message = error instanceof Error ? error.message : String(error);
        throw new Error(`migration ${file.version} failed: ${message}`, { cause: error });
      }
      applied.push(file.version);
    }
    return { applied, alreadyApplied: done.size, checksumsRecorded };
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [LOCK_KEY]).catch(() => {});
    await client.end();
  }
}

/**
 * The version table, with its checksum column. A table made by a release before checksums
 * gets the column (nullable, so that release's migrator, which inserts only the version,
 * and its processes, which read only the version, keep working on it).
 */
async function ensureTable(client: pg.Client): Promise<void> {
  await client.query(`CREATE TABLE IF NOT EXISTS public.schema_migrations (
    version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now(), checksum text)`);
  const { rows } = await client.query(
    `SELECT 1 FROM pg_attribute
      WHERE attrelid = 'public.schema_migrations'::regclass AND attname = 'checksum'
        AND NOT attisdropped`,
  );
  // Only when missing: ADD COLUMN IF NOT EXISTS would still take an exclusive lock each run.
  if (!rows.length) {
    await client.query('ALTER TABLE public.schema_migrations ADD COLUMN checksum text');
  }
}
