// PostgreSQL time by statement for one phase, from pg_stat_statements — only where the server
// loads it (shared_preload_libraries), which a bench cannot arrange on a shared server.
import type { BenchContext } from './context.ts';

export interface StatementRow {
  query: string;
  callsPerTask: number;
  msPerTask: number;
  planMsPerTask: number;
  /**
   * Shared buffers each call touched (hit or read): a lookup by key touches a handful, so
   * hundreds say the plan scans (an index over many rows, a table), whatever its time.
   */
  buffersPerCall: number;
}

export async function statementsAvailable(ctx: BenchContext): Promise<boolean> {
  const [row] = await ctx.sql<{ setting: string }>(
    `SELECT setting FROM pg_settings WHERE name = 'shared_preload_libraries'`,
  );
  if (!/pg_stat_statements/.test(row?.setting ?? '')) return false;
  await ctx.sql(`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`);
  return true;
}

export async function resetStatements(ctx: BenchContext): Promise<void> {
  await ctx.sql(`SELECT pg_stat_statements_reset()`);
}

/** The statements of this database since the last reset, by time, per task. */
export async function statementSplit(
  ctx: BenchContext,
  tasks: number,
  limit = 30,
): Promise<StatementRow[]> {
  const rows = await ctx.sql<{
    query: string;
    calls: string;
    exec: number;
    plan: number;
    buffers: string;
  }>(
    `SELECT regexp_replace(query, '\\s+', ' ', 'g') AS query, calls,
            total_exec_time AS exec, total_plan_time AS plan,
            shared_blks_hit + shared_blks_read AS buffers
       FROM pg_stat_statements
      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND query NOT ILIKE '%pg_stat_statements%'
      ORDER BY total_exec_time + total_plan_time DESC LIMIT $1`,
    [limit],
  );
  const n = Math.max(1, tasks);
  return rows.map((r) => ({
    query: r.query,
    callsPerTask: Number(r.calls) / n,
    msPerTask: (r.exec + r.plan) / n,
    planMsPerTask: r.plan / n,
    buffersPerCall: Number(r.buffers) / Math.max(1, Number(r.calls)),
  }));
}

/** A markdown table of the split (statement text cut to `width` characters). */
export function statementTable(rows: StatementRow[], width = 110): string[] {
  const cut = (q: string) =>
    (q.length > width ? `${q.slice(0, width)}…` : q).replace(/\|/g, '\\|').replace(/`/g, "'");
  return [
    '| statement | calls per task | ms per task (plan) | buffers per call |',
    '|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| \`${cut(r.query)}\` | ${r.callsPerTask.toFixed(2)} | ${r.msPerTask.toFixed(2)} (${r.planMsPerTask.toFixed(2)}) | ${r.buffersPerCall.toFixed(0)} |`,
    ),
  ];
}
