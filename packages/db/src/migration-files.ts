import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

/** A numbered migration file: `NNN_name.sql` (three digits or more). */
export const MIGRATION_FILE = /^(\d{3,})[-_][\w-]+\.sql$/;

export interface MigrationFile {
  /** The file name, which is also its row in public.schema_migrations. */
  version: string;
  sql: string;
  /** sha256 (hex) of the file's bytes, as recorded when it is applied. */
  checksum: string;
}

/** The migration file names of `dir`, in the order they apply. */
export async function migrationFileNames(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((f) => MIGRATION_FILE.test(f)).sort();
}

/** Every migration of `dir` with its text and checksum, in the order they apply. */
export async function readMigrationFiles(dir: string): Promise<MigrationFile[]> {
  const files: MigrationFile[] = [];
  for (const version of await migrationFileNames(dir)) {
    const bytes = await readFile(path.join(dir, version));
    files.push({
      version,
      sql: bytes.toString('utf8'),
      checksum: createHash('sha256').update(bytes).digest('hex'),
    });
  }
  return files;
}
