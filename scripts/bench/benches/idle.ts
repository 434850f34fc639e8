import type { BenchContext } from '../lib/context.ts';
import { cpuMeter, cpuMsOf, stackBackends, type PidSource } from '../lib/cpu.ts';
import { fmt, sleep } from '../lib/stats.ts';
import { WORKERS_ENV } from './tasks.ts';
import { NO_CAPS, stackGroups } from './throughput.ts';

const WINDOW_MS = 10_000;

/**
 * What waiting workers cost the database: an idle stack with 1 and with 8 idle workers, 10 s
 * each, twice each, alternating, keeping the lower (the benches before leave the database with
 * work of its own for a while, autovacuum of the tables they filled, which lands on whichever
 * window it falls in). Each window opens `BENCH_IDLE_SETTLE_MS` after the workers reported
 * ready; the log splits each window's CPU by session (application_name) and says how much of
 * it went to sessions opened during the window.
 */
export async function benchIdleWorkers(ctx: BenchContext): Promise<void> {
  const settleMs = Number(process.env.BENCH_IDLE_SETTLE_MS ?? 2000);
  const idle: Record<number, { all: number; backends: number }> = {};
  const own: PidSource = () => stackBackends(ctx, { background: false });
  for (const workers of [1, 8, 1, 8]) {
    await ctx.topology({ gateways: 1, workers, gatewayEnv: NO_CAPS, workerEnv: WORKERS_ENV });
    await sleep(settleMs);
    const before = new Map(own().map((pid) => [pid, cpuMsOf(pid) ?? 0]));
    const meter = cpuMeter({ postgres: stackGroups(ctx).postgres!, backends: own });
    await sleep(WINDOW_MS);
    const cpu = meter.stop();
    const seen = { all: cpu.ms.postgres ?? 0, backends: cpu.ms.backends ?? 0 };
    const kept = idle[workers];
    idle[workers] = kept && kept.backends <= seen.backends ? kept : seen;
    ctx.log(
      `idle, ${workers} workers: PostgreSQL ${cpu.ms.postgres} ms in 10 s (the bench database's backends ${cpu.ms.backends} ms); by session: ${await bySession(ctx, before)}`,
    );
  }
  const extra = (idle[8]!.backends - idle[1]!.backends) / 7;
  ctx.rows.push({
    section: 'Scaling',
    goalId: 'idle-workers',
    measure: 'PostgreSQL CPU of an idle stack over 10 s: 1 idle worker vs 8 idle workers',
    result: `${fmt(idle[1]!.backends)} ms vs ${fmt(idle[8]!.backends)} ms in the bench database's backends (with the server's shared background processes: ${fmt(idle[1]!.all)} vs ${fmt(idle[8]!.all)} ms); ${fmt(extra, 1)} ms per extra idle worker`,
    goal: 'goal ≤ 10 ms per idle worker per 10 s (1/1000 of a core)',
    met: extra <= 10,
    samples: `10 s each, ${fmt(settleMs / 1000, 1)} s after the workers were ready; 1, 8, 1, 8 workers, the lower of each kept`,
    note: 'an idle worker announces itself every 5 s and waits for the maintenance leader lock in PostgreSQL, one statement every 10 s; only the leader runs maintenance and pg-boss supervision',
  });
  await ctx.topology({ gateways: 1, workers: 0, gatewayEnv: NO_CAPS });
}

/** "worker-3 12 ms (2 sessions, 1 opened in the window: 9 ms), …", largest first. */
async function bySession(ctx: BenchContext, before: Map<number, number>): Promise<string> {
  const rows = await ctx.sql<{ pid: number; name: string }>(
    `SELECT pid, coalesce(nullif(application_name, ''), backend_type) AS name
       FROM pg_stat_activity WHERE datname = current_database()`,
  );
  const groups = new Map<string, { ms: number; sessions: number; born: number; bornMs: number }>();
  for (const { pid, name } of rows) {
    if (ctx.ownBackends.has(pid)) continue;
    const now = cpuMsOf(pid);
    if (now === undefined) continue;
    const start = before.get(pid);
    const ms = now - (start ?? 0);
    const g = groups.get(name) ?? { ms: 0, sessions: 0, born: 0, bornMs: 0 };
    g.ms += ms;
    g.sessions += 1;
    if (start === undefined) {
      g.born += 1;
      g.bornMs += ms;
    }
    groups.set(name, g);
  }
  return [...groups]
    .sort((a, b) => b[1].ms - a[1].ms)
    .map(
      ([name, g]) =>
        `${name} ${g.ms} ms (${g.sessions} session${g.sessions > 1 ? 's' : ''}${g.born ? `, ${g.born} opened in the window: ${g.bornMs} ms` : ''})`,
    )
    .join(', ');
}
