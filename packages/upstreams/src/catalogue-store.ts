import type { Pool } from 'pg';
import { withTransaction } from '@mtg/db';

/** One discovered upstream tool, as stored in app.upstream_tools. */
export interface CatalogueEntry {
  upstream: string;
  name: string;
  upstreamName: string;
  title: string | null;
  description: string;
  inputSchema: Record<string, unknown>;
  taskSupport: 'forbidden' | 'optional' | 'required';
  fingerprint: string;
}

/**
 * Replaces what one upstream lists, in one transaction: a tool it no longer lists goes, the
 * others are upserted. Answers whether anything changed.
 */
export async function replaceCatalogue(
  pool: Pool,
  upstream: string,
  entries: CatalogueEntry[],
): Promise<boolean> {
  return withTransaction(pool, async (c) => {
    const removed = await c.query(
      `DELETE FROM app.upstream_tools WHERE upstream = $1 AND NOT (name = ANY($2::text[]))`,
      [upstream, entries.map((e) => e.name)],
    );
    let changed = (removed.rowCount ?? 0) > 0;
    for (const e of entries) {
      const r = await c.query(
        `INSERT INTO app.upstream_tools
           (upstream, name, upstream_name, title, description, input_schema, task_support, fingerprint)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (upstream, name) DO UPDATE SET
           upstream_name = EXCLUDED.upstream_name, title = EXCLUDED.title,
           description = EXCLUDED.description, input_schema = EXCLUDED.input_schema,
           task_support = EXCLUDED.task_support, fingerprint = EXCLUDED.fingerprint,
           discovered_at = now()
         WHERE app.upstream_tools.fingerprint IS DISTINCT FROM EXCLUDED.fingerprint
            OR app.upstream_tools.description IS DISTINCT FROM EXCLUDED.description
            OR app.upstream_tools.title IS DISTINCT FROM EXCLUDED.title`,
        [
          upstream,
          e.name,
          e.upstreamName,
          e.title,
          e.description,
          JSON.stringify(e.inputSchema),
          e.taskSupport,
          e.fingerprint,
        ],
      );
      if ((r.rowCount ?? 0) > 0) changed = true;
    }
    await c.query(
      `INSERT INTO app.upstream_status (upstream, last_success_at) VALUES ($1, now())
       ON CONFLICT (upstream) DO UPDATE SET last_success_at = now()`,
      [upstream],
    );
    return changed;
  });
}

export async function recordDiscoveryFailure(
  pool: Pool,
  upstream: string,
  error: string,
): Promise<void> {
  await pool.query(
    `INSERT INTO app.upstream_status (upstream, last_failure_at, last_error) VALUES ($1, now(), $2)
     ON CONFLICT (upstream) DO UPDATE SET last_failure_at = now(), last_error = $2`,
    [upstream, error.slice(0, 500)],
  );
}

export async function readCatalogue(pool: Pool): Promise<CatalogueEntry[]> {
  const r = await pool.query<{
    upstream: string;
    name: string;
    upstream_name: string;
    title: string | null;
    description: string;
    input_schema: Record<string, unknown>;
    task_support: CatalogueEntry['taskSupport'];
    fingerprint: string;
  }>(
    `SELECT upstream, name, upstream_name, title, description, input_schema, task_support, fingerprint
       FROM app.upstream_tools ORDER BY upstream, name`,
  );
  return r.rows.map((row) => ({
    upstream: row.upstream,
    name: row.name,
    upstreamName: row.upstream_name,
    title: row.title,
    description: row.description,
    inputSchema: row.input_schema,
    taskSupport: row.task_support,
    fingerprint: row.fingerprint,
  }));
}
