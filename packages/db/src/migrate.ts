import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';

export interface MigrateResult {
  applied: string[];
  alreadyApplied: number;
}

const FILE = /^(\d{3,})[-_][\w-]+\.sql$/;
// Any constant shared by every migrator of this project: two processes starting at once
// serialise on it, and the second sees the first's versions as applied.
const LOCK_KEY = 7_310_042_001;

/**
 * Applies numbered SQL files from `dir` in order, each once, each in its own transaction
 * with its version row written in the same transaction. Forward-only.
 */
export async function migrate(connectionString: string, dir: string): Promise<MigrateResult> {
  const files = (await readdir(dir)).filter((f) => FILE.test(f)).sort();
  const client = new pg.Client({ connectionString, application_name: 'migrate' });
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [LOCK_KEY]);
    await client.query(`CREATE TABLE IF NOT EXISTS public.schema_migrations (
      version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
    const done = new Set(
      (
        await client.query<{ version: string }>('SELECT version FROM public.schema_migrations')
      ).rows.map((r) => r.version),
    );
    const applied: string[] = [];
    for (const file of files) {
      if (done.has(file)) continue;
      const sql = await readFile(path.join(dir, file), 'utf8');
      await client.query('BEGIN');
      try {
        await client.query('INSERT INTO public.schema_migrations (version) VALUES ($1)', [file]);
        await client.query(sql);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK');
        const message = error instanceof Error ? error.message : String(error);
        throw new Error(`migration ${file} failed: ${message}`, { cause: error });
      }
      applied.push(file);
    }
    return { applied, alreadyApplied: done.size };
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [LOCK_KEY]).catch(() => {});
    await client.end();
  }
}
