import type pg from 'pg';

export interface CountDrift {
  tenant: string;
  /** null: the tenant's own count. */
  subject: string | null;
  kept: number;
  actual: number;
}

/**
 * Where app.active_tenants / app.active_subjects (migration 230) differ from a count of the
 * active tasks: no row, when every path that started, ended or removed a task kept them. One
 * statement, so one snapshot: the counts commit with the tasks, so this holds at any instant,
 * work in flight or not.
 */
export const ACTIVE_COUNTS_DRIFT = `WITH actual AS (
    SELECT tenant, subject, count(*)::int AS n FROM app.tasks
     WHERE status IN ('working', 'input_required') GROUP BY tenant, subject)
  SELECT tenant, subject, COALESCE(k.active, 0) AS kept, COALESCE(a.n, 0) AS actual
    FROM actual a FULL JOIN app.active_subjects k USING (tenant, subject)
   WHERE COALESCE(k.active, 0) <> COALESCE(a.n, 0)
  UNION ALL
  SELECT tenant, NULL, COALESCE(k.active, 0), COALESCE(a.n, 0)
    FROM (SELECT tenant, sum(n)::int AS n FROM actual GROUP BY tenant) a
         FULL JOIN app.active_tenants k USING (tenant)
   WHERE COALESCE(k.active, 0) <> COALESCE(a.n, 0)`;

/** ACTIVE_COUNTS_DRIFT on a pool. */
export async function activeCountsDrift(db: pg.Pool): Promise<CountDrift[]> {
  return (await db.query<CountDrift>(ACTIVE_COUNTS_DRIFT)).rows;
}
