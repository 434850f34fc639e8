// Batches of tasks for the cost measurements: created while the workers are held still
// (SIGSTOP), so a start's cost and a run's cost are measured apart, then run to the end.
import type { BenchContext } from './context.ts';
import { sleep } from './stats.ts';

/**
 * Freezes every worker process (SIGSTOP) until the returned release() (SIGCONT). A frozen
 * worker uses no CPU and fetches nothing; its LISTEN connection keeps the notifications of
 * tasks created meanwhile, so on release it picks them up as it would have at once. Held
 * for seconds only: well inside WORKER_SEEN_WITHIN_MS, so no one takes it for gone.
 */
export function holdWorkers(ctx: BenchContext): () => void {
  const pids = [...ctx.stack.workers.values()].filter((p) => p.running()).map((p) => p.pid);
  for (const pid of pids) process.kill(pid, 'SIGSTOP');
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    process.off('exit', release);
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGCONT');
      } catch {
        // exited meanwhile
      }
    }
  };
  // Never leave a worker frozen, whatever way the bench ends.
  process.once('exit', release);
  return release;
}

/** The database's clock (task and audit timestamps are the database's). */
export async function dbNow(ctx: BenchContext): Promise<Date> {
  return (await ctx.sql<{ t: Date }>('SELECT clock_timestamp() AS t'))[0]!.t;
}

export interface TaskRef {
  id: string;
  token: string;
}

/** The tasks created since `since` (optionally excluding some), with their owner's token. */
export async function tasksSince(
  ctx: BenchContext,
  since: Date,
  exclude: string[] = [],
): Promise<TaskRef[]> {
  const rows = await ctx.sql<{ id: string; tenant: string; subject: string }>(
    `SELECT id, tenant, subject FROM app.tasks WHERE created_at >= $1 AND NOT (id = ANY($2)) ORDER BY created_at`,
    [since, exclude],
  );
  const tokens = new Map(ctx.users.map((u) => [`${u.tenant}/${u.sub}`, u.token]));
  return rows.map((r) => ({ id: r.id, token: tokens.get(`${r.tenant}/${r.subject}`)! }));
}

/** Waits until none of `ids` is still running or queued; returns what did not end. */
export async function waitEnded(
  ctx: BenchContext,
  ids: string[],
  timeoutMs: number,
): Promise<number> {
  const until = Date.now() + timeoutMs;
  // Only the ids still open are looked up again, each by its primary key.
  let open = ids;
  for (;;) {
    open = (
      await ctx.sqlByIndex<{ id: string }>(
        `SELECT id FROM app.tasks WHERE id = ANY($1) AND ended_at IS NULL`,
        [open],
      )
    ).map((r) => r.id);
    if (open.length === 0 || Date.now() > until) return open.length;
    await sleep(25);
  }
}

/** Counts of the tasks' outcomes and of the work their runs did, from rows and audit events. */
export async function runCounts(ctx: BenchContext, ids: string[]) {
  const [r] = await ctx.sql<{
    completed: number;
    failed: number;
    other: number;
    steps: number;
    exchanges: number;
    writes: number;
  }>(
    `SELECT (SELECT count(*) FILTER (WHERE status = 'completed') FROM app.tasks WHERE id = ANY($1))::int AS completed,
            (SELECT count(*) FILTER (WHERE status = 'failed') FROM app.tasks WHERE id = ANY($1))::int AS failed,
            (SELECT count(*) FILTER (WHERE status NOT IN ('completed', 'failed')) FROM app.tasks WHERE id = ANY($1))::int AS other,
            (SELECT count(*) FROM audit.events WHERE task_id = ANY($1) AND type = 'task.step_completed')::int AS steps,
            (SELECT count(*) FROM audit.events WHERE task_id = ANY($1) AND type = 'task.identity_refreshed')::int AS exchanges,
            (SELECT count(*) FROM downstream.writes WHERE task_id = ANY($1::text[]))::int AS writes`,
    [ids],
  );
  return r!;
}

/**
 * Keeps tasks queued without a worker ever running them (their job is deferred a day): the
 * targets of status polls that must stay `working` while workers run everything else.
 */
export async function deferJobs(ctx: BenchContext, ids: string[]): Promise<void> {
  await ctx.sql(
    `UPDATE pgboss.job SET start_after = now() + interval '1 day'
      WHERE id IN (SELECT job_id FROM app.tasks WHERE id = ANY($1) AND job_id IS NOT NULL)`,
    [ids],
  );
}

/**
 * Rows inserted and updated per table of the product's schemas, as the statistics
 * collector counts them (partitions folded into their table). PostgreSQL publishes a
 * backend's counts up to 10 s after its transactions (at once only when it keeps busy), so
 * callers wait that long before each snapshot. Without pg_stat_statements this is what says which statements a
 * phase runs: each row write is one (or part of one) statement.
 */
export async function tableWrites(ctx: BenchContext): Promise<Map<string, number>> {
  const rows = await ctx.sql<{ t: string; ins: string; upd: string; hot: string }>(
    `SELECT schemaname || '.' || regexp_replace(relname, '_[0-9]{4,8}(_[0-9]{2})?$', '') AS t,
            sum(n_tup_ins) AS ins, sum(n_tup_upd) AS upd, sum(n_tup_hot_upd) AS hot
       FROM pg_stat_all_tables WHERE schemaname IN ('app', 'audit', 'pgboss', 'downstream')
      GROUP BY 1`,
  );
  const m = new Map<string, number>();
  for (const r of rows) {
    m.set(`${r.t} insert`, Number(r.ins));
    m.set(`${r.t} update`, Number(r.upd));
    // A HOT update writes no index entry (it needs no indexed column changed and room on
    // the row's page): the share of updates that are HOT is what each update's cost turns on.
    m.set(`${r.t} update (HOT)`, Number(r.hot));
  }
  return m;
}

/** "app.tasks update 3.0, audit.events insert 5.0" per task, largest first. */
export function describeWrites(
  before: Map<string, number>,
  after: Map<string, number>,
  tasks: number,
): string {
  return [...after]
    .map(([k, v]) => [k, (v - (before.get(k) ?? 0)) / Math.max(1, tasks)] as const)
    .filter(([, v]) => v >= 0.05)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v.toFixed(1)}`)
    .join(', ');
}

/** "task.step_completed 2.0, …" per task, from the audit chain itself (exact). */
export async function auditEventsPerTask(ctx: BenchContext, ids: string[]): Promise<string> {
  const rows = await ctx.sql<{ type: string; n: number }>(
    `SELECT type, count(*)::int AS n FROM audit.events WHERE task_id = ANY($1) GROUP BY type ORDER BY 2 DESC, 1`,
    [ids],
  );
  const total = rows.reduce((s, r) => s + r.n, 0);
  return (
    `${(total / Math.max(1, ids.length)).toFixed(1)} per task (` +
    rows.map((r) => `${r.type} ${(r.n / Math.max(1, ids.length)).toFixed(1)}`).join(', ') +
    ')'
  );
}
