import type { AppliedMigration } from './applied-migrations.ts';
import type { MigrationFile } from './migration-files.ts';

/**
 * A migration file differs from the one that was applied (its sha256 is not the recorded
 * one): the schema this release assumes may not be the one the database has. `changed`
 * names the files.
 */
export class MigrationChangedError extends Error {
  readonly code = 'migration_checksum_mismatch';
  readonly changed: string[];
  constructor(changed: string[]) {
    super(
      `migration ${changed.join(', ')} changed since it was applied (its sha256 is not the one ` +
        'recorded in public.schema_migrations): restore the file as it was applied; a change ' +
        'to the schema is a new migration file, never an edit of an applied one',
    );
    this.name = 'MigrationChangedError';
    this.changed = changed;
  }
}

/** The files of this release whose applied row records another checksum. */
export function changedMigrations(
  files: readonly MigrationFile[],
  applied: ReadonlyMap<string, AppliedMigration>,
): string[] {
  return files
    .filter((f) => {
      const recorded = applied.get(f.version)?.checksum;
      return recorded != null && recorded !== f.checksum;
    })
    .map((f) => f.version);
}
