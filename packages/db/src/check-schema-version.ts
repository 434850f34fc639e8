import { readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

/** The migrations this release ships (this package's migrations folder, shipped with it). */
export const MIGRATIONS_DIR = fileURLToPath(new URL('../migrations', import.meta.url));

const FILE = /^(\d{3,})[-_][\w-]+\.sql$/;

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
 * Refuses to go on when a migration of `dir` has not been applied. Reads
 * public.schema_migrations as the login user, before any SET ROLE (the roles themselves come
 * from the migrations). A database a newer release migrated further is fine: migrations are
 * additive, and running processes keep working across them.
 */
export async function checkSchemaVersion(
  connectionString: string,
  dir: string = MIGRATIONS_DIR,
): Promise<void> {
  const expected = (await readdir(dir)).filter((f) => FILE.test(f)).sort();
  const client = new pg.Client({ connectionString, application_name: 'schema-check' });
  await client.connect();
  let applied: Set<string>;
  try {
    const { rows } = await client.query<{ version: string }>(
      'SELECT version FROM public.schema_migrations',
    );
    applied = new Set(rows.map((r) => r.version));
  } catch (error) {
    // 42P01: no table yet (never migrated); 42501: not readable (before migration 045).
    const code = (error as { code?: string }).code;
    if (code === '42P01' || code === '42501') applied = new Set();
    else throw error;
  } finally {
    await client.end().catch(() => {});
  }
  const missing = expected.filter((f) => !applied.has(f));
  if (missing.length) throw new SchemaNotMigratedError(missing);
}
