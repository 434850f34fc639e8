import type { Queryable } from '@mtg/db';

/** Creates this month's partition and the next `monthsAhead` if missing (maintenance). */
export async function ensurePartitions(db: Queryable, monthsAhead = 2): Promise<string[]> {
  const rows = await db.query<{ name: string }>('SELECT audit.ensure_partitions($1) AS name', [
    monthsAhead,
  ]);
  return rows.rows.map((r) => r.name);
}
