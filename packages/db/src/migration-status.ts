import pg from 'pg';
import { readAppliedMigrations, type AppliedMigration } from './applied-migrations.ts';
import { changedMigrations, MigrationChangedError } from './migration-changed-error.ts';
import { readMigrationFiles, type MigrationFile } from './migration-files.ts';

/**
 * Where one migration stands. `applied` / `pending`: a file of this release; `not_in_release`:
 * a row with no file here (a newer release migrated this database). Checksum, for an applied
 * file: `ok` (the file is what was applied), `changed` (edited since: migrate and every app
 * start refuse), `unrecorded` (applied before checksums existed; the next migrate records it).
 */
export interface MigrationStatusEntry {
  version: string;
  state: 'applied' | 'pending' | 'not_in_release';
  appliedAt: Date | null;
  checksum: 'ok' | 'changed' | 'unrecorded' | null;
}

/** Every migration of `dir` and every applied row, in version order. Reads only. */
export async function migrationStatus(
  connectionString: string,
  dir: string,
): Promise<MigrationStatusEntry[]> {
  const files = await readMigrationFiles(dir);
  const applied = await readApplied(connectionString);
  const entries: MigrationStatusEntry[] = files.map((f) => {
    const row = applied.get(f.version);
    if (!row) return { version: f.version, state: 'pending', appliedAt: null, checksum: null };
    return {
      version: f.version,
      state: 'applied',
      appliedAt: row.appliedAt,
      checksum:
        row.checksum === null ? 'unrecorded' : row.checksum === f.checksum ? 'ok' : 'changed',
    };
  });
  const known = new Set(files.map((f) => f.version));
  for (const row of applied.values()) {
    if (known.has(row.version)) continue;
    entries.push({
      version: row.version,
      state: 'not_in_release',
      appliedAt: row.appliedAt,
      checksum: null,
    });
  }
  return entries.sort((a, b) => (a.version < b.version ? -1 : a.version > b.version ? 1 : 0));
}

/**
 * What `migrate` would apply, with its SQL, in order, without applying anything (a dry run).
 * Throws MigrationChangedError, as migrate would, when an applied file was edited.
 */
export async function pendingMigrations(
  connectionString: string,
  dir: string,
): Promise<MigrationFile[]> {
  const files = await readMigrationFiles(dir);
  const applied = await readApplied(connectionString);
  const changed = changedMigrations(files, applied);
  if (changed.length) throw new MigrationChangedError(changed);
  return files.filter((f) => !applied.has(f.version));
}

async function readApplied(connectionString: string): Promise<Map<string, AppliedMigration>> {
  const client = new pg.Client({ connectionString, application_name: 'migrate-status' });
  await client.connect();
  try {
    return await readAppliedMigrations(client);
  } finally {
    await client.end().catch(() => {});
  }
}
