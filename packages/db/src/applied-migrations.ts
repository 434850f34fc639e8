import type pg from 'pg';

/** One row of public.schema_migrations. */
export interface AppliedMigration {
  version: string;
  appliedAt: Date;
  /** NULL for rows applied before checksums were recorded (until the next migrate run). */
  checksum: string | null;
}

/**
 * The rows of public.schema_migrations, or none when the table does not exist yet. Reads the
 * checksum through to_jsonb so that a database whose table predates the column (a release
 * before checksums, not migrated since) reads as "unrecorded" instead of failing.
 */
export async function readAppliedMigrations(
  client: pg.ClientBase,
): Promise<Map<string, AppliedMigration>> {
  try {
    const { rows } = await client.query<{
      version: string;
      applied_at: Date;
      checksum: string | null;
    }>(
      `SELECT version, applied_at, to_jsonb(m) ->> 'checksum' AS checksum
         FROM public.schema_migrations m`,
    );
    return new Map(
      rows.map((r) => [
        r.version,
        { version: r.version, appliedAt: r.applied_at, checksum: r.checksum },
      ]),
    );
  } catch (error) {
    // 42P01: no table yet (never migrated).
    if ((error as { code?: string }).code === '42P01') return new Map();
    throw error;
  }
}
