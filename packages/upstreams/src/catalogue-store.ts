import type { Pool } from 'pg';
import { withTransaction } from '@mtg/db';
import type { RefusedTool } from './refused-tool.ts';

/**
 * Notified (on commit) when a listing changed what app.upstream_tools holds, `{ upstream }`:
 * workers re-read the catalogue then instead of polling it.
 */
export const CATALOGUE_CHANNEL = 'mtg_upstream_catalogue';

/** Refusals kept per upstream for the console (every one is logged and counted). */
export const MAX_REFUSALS_KEPT = 200;

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
 * others are upserted, and its refused tools replace the ones its last listing refused.
 *
 * A served name is unique across upstreams. A row of another upstream holding one of these
 * names is `stale` when the current configuration no longer gives that upstream the name (it
 * was removed, or its prefix changed): it is deleted, so a row nobody will relist never blocks
 * a listing. A row the other upstream still owns is kept, and this upstream's tool of that
 * name is refused (`name_taken`) — only that tool.
 */
export async function replaceCatalogue(
  pool: Pool,
  upstream: string,
  listed: CatalogueEntry[],
  options: {
    refused?: readonly RefusedTool[];
    stale?: (row: { upstream: string; name: string }) => boolean;
  } = {},
): Promise<{ changed: boolean; refused: RefusedTool[] }> {
  return withTransaction(pool, async (c) => {
    const refused = [...(options.refused ?? [])];
    const held = await c.query<{ upstream: string; name: string }>(
      `SELECT upstream, name FROM app.upstream_tools
        WHERE upstream <> $1 AND name = ANY($2::text[]) FOR UPDATE`,
      [upstream, listed.map((e) => e.name)],
    );
    const stale = held.rows.filter((r) => options.stale?.(r) ?? false);
    if (stale.length) {
      await c.query(
        `DELETE FROM app.upstream_tools t USING unnest($1::text[], $2::text[]) AS s(upstream, name)
          WHERE t.upstream = s.upstream AND t.name = s.name`,
        [stale.map((r) => r.upstream), stale.map((r) => r.name)],
      );
    }
    const taken = new Set(held.rows.filter((r) => !stale.includes(r)).map((r) => r.name));
    const entries = listed.filter((e) => !taken.has(e.name));
    for (const e of listed) {
      if (taken.has(e.name)) {
        refused.push({
          upstream,
          upstreamName: e.upstreamName,
          name: e.name,
          reason: 'name_taken',
        });
      }
    }
    const removed = await c.query(
      `DELETE FROM app.upstream_tools WHERE upstream = $1 AND NOT (name = ANY($2::text[]))`,
      [upstream, entries.map((e) => e.name)],
    );
    let changed = (removed.rowCount ?? 0) > 0 || stale.length > 0;
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
    await c.query(`DELETE FROM app.upstream_refused_tools WHERE upstream = $1`, [upstream]);
    const kept = refused.slice(0, MAX_REFUSALS_KEPT);
    if (kept.length) {
      await c.query(
        `INSERT INTO app.upstream_refused_tools (upstream, upstream_name, name, reason)
         SELECT $1, s.upstream_name, s.name, s.reason
           FROM unnest($2::text[], $3::text[], $4::text[]) AS s(upstream_name, name, reason)
         ON CONFLICT (upstream, upstream_name) DO NOTHING`,
        [
          upstream,
          kept.map((r) => r.upstreamName),
          kept.map((r) => r.name),
          kept.map((r) => r.reason),
        ],
      );
    }
    await c.query(
      `INSERT INTO app.upstream_status (upstream, last_success_at) VALUES ($1, now())
       ON CONFLICT (upstream) DO UPDATE SET last_success_at = now()`,
      [upstream],
    );
    if (changed)
      await c.query('SELECT pg_notify($1, $2)', [CATALOGUE_CHANNEL, JSON.stringify({ upstream })]);
    return { changed, refused };
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
