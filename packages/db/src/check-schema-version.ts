import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { readAppliedMigrations, type AppliedMigration } from './applied-migrations.ts';
import { changedMigrations, MigrationChangedError } from './migration-changed-error.ts';
import { readMigrationFiles } from './migration-files.ts';

/** The migrations this release ships (this package's migrations folder, shipped with it). */
export const MIGRATIONS_DIR = fileURLToPath(new URL('../migrations', import.meta.url));

/** The database lacks migrations this release needs; `missing` names them. */
export class SchemaNotMigratedError extends Error {
  readonly code = 'schema_not_migrated';
  readonly missing: string[];
  constructor(missing: string[]) {
    super(
      `the database is not migrated for this release (missing ${missing.length > 3 ? `${missing.slice(0, 3).join(', ')} and ${missing.length - 3} more` : missing.join(', ')}): ` +
        'run `npm run migrate` (in Kubernetes, the migrations Job) with the same TOOL_PACKS, then start again',
    );
    this.name = 'SchemaNotMigratedError';
    this.missing = missing;
  }
}

/**
 * Refuses to go on when a migration of `dir` has not been applied (SchemaNotMigratedError) or
 * was applied from another text than this release's file (MigrationChangedError). Reads
 * public.schema_migrations as the login user, before any SET ROLE (the roles themselves come
 * from the migrations). A database a newer release migrated further is fine: migrations are
 * additive, and running processes keep working across them. A row without a checksum (applied
 * before checksums existed) passes: the next migrate run records it.
 */
export async function checkSchemaVersion(
  connectionString: string,
  dir: string = MIGRATIONS_DIR,
): Promise<void> {
  const files = await readMigrationFiles(dir);
  const client = new pg.Client({ connectionString, application_name: 'schema-check' });
  await client.connect();
  let applied: Map<string, AppliedMigration>;
  try {
    applied = await readAppliedMigrations(client);
  } catch (error) {
    // 42501: not readable (before migration 045).
    if ((error as { code?: string }).code === '42501') applied = new Map();
    else throw error;
  } finally {
    await client.end().catch(() => {});
  }
  const changed = changedMigrations(files, applied);
  if (changed.length) throw new MigrationChangedError(changed);
  const missing = files.filter((f) => !applied.has(f.version)).map((f) => f.version);
  if (missing.length) throw new SchemaNotMigratedError(missing);
}
