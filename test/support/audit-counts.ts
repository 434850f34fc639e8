import { sql } from './sql.ts';

/** Audit events by `type/reason` among the types given (LIKE patterns): what a request wrote. */
export async function auditCounts(url: string, types: string[]): Promise<Record<string, number>> {
  const rows = await sql<{ type: string; reason: string | null; n: number }>(
    url,
    `SELECT type, reason, count(*)::int AS n FROM audit.events
      WHERE type LIKE ANY($1) GROUP BY 1, 2`,
    [types],
  );
  return Object.fromEntries(rows.map((r) => [`${r.type}/${r.reason ?? ''}`, r.n]));
}

/** The counts that changed from `before` to `after`, by how much. */
export function countsDelta(after: Record<string, number>, before: Record<string, number>) {
  return Object.fromEntries(
    Object.keys(after)
      .map((k) => [k, after[k]! - (before[k] ?? 0)] as const)
      .filter(([, n]) => n !== 0),
  );
}
