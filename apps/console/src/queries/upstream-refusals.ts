import type { Pool } from '@mtg/db';

export interface UpstreamRefusal {
  upstream: string;
  /** The upstream's own name for the tool. */
  upstreamName: string;
  /** The name it would have been served under ('' when it cannot be one). */
  name: string;
  reason: string;
  refusedAt: Date;
}

/**
 * The tools each upstream's latest listing refused (a reserved name, past its maxTools, an
 * invalid or repeated name, a name another upstream serves): the gateway records them in
 * app.upstream_refused_tools, read here through the console's view. Names no tenant.
 */
export async function readUpstreamRefusals(pool: Pool): Promise<UpstreamRefusal[]> {
  const r = await pool.query<{
    upstream: string;
    upstream_name: string;
    name: string | null;
    reason: string;
    refused_at: Date;
  }>(
    `SELECT upstream, upstream_name, name, reason, refused_at FROM app.console_upstream_refusals
      ORDER BY upstream, reason, upstream_name`,
  );
  return r.rows.map((row) => ({
    upstream: row.upstream,
    upstreamName: row.upstream_name,
    name: row.name ?? '',
    reason: row.reason,
    refusedAt: row.refused_at,
  }));
}
