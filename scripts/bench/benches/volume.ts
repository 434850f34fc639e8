// Cost as the data grows: poll p50, start p50 and CPU per task on the bench database as it
// is, then again after scripts/bench/seed-volume.ts has written a history into it (1,000,000
// ended tasks and 10,000,000 audit events by default); audit:verify of the whole trail and of
// one tenant's chain (time and peak memory); and the retention purge, by how much it removes.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { purgeExpired } from '@mtg/tasks';
import type { BenchContext } from '../lib/context.ts';
import { runJsonScript } from '../lib/child-json.ts';
import { cpuMeter, stackBackends } from '../lib/cpu.ts';
import { runLoadProcess } from '../lib/load-client.ts';
import { REPO_ROOT, residentMemory } from '../lib/process-stack.ts';
import { fmt, median, sleep } from '../lib/stats.ts';
import { dbNow, tasksSince, waitEnded } from '../lib/task-batches.ts';
import { NO_CAPS, pollRuns, pollTargets, stackGroups, startRun } from './throughput.ts';

const SEED = fileURLToPath(new URL('../seed-volume.ts', import.meta.url));
const CLI = fileURLToPath(new URL('../../../apps/cli/src/main.ts', import.meta.url));

function setting(name: string, fallback: number): number {
  const raw = process.env[name];
  const n = raw ? Number(raw) : fallback;
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer`);
  return n;
}

interface Figures {
  pollP50: number;
  pollRate: number;
  startP50: number;
  cpuPerTask: number;
}

/** A batch of tasks with two workers running them: CPU of every process, start → ended. */
async function cpuPerTask(ctx: BenchContext, tasks: number): Promise<number> {
  await ctx.topology({ gateways: 1, workers: 2, gatewayEnv: NO_CAPS });
  await ctx.reset();
  const since = await dbNow(ctx);
  const meter = cpuMeter(stackGroups(ctx));
  const load = await runLoadProcess({
    urls: [ctx.stack.mcpUrl],
    connections: 10,
    durationS: 120,
    amount: tasks,
    scenario: {
      kind: 'start',
      tokens: ctx.users.map((u) => u.token),
      runTag: `vol-${Date.now()}`,
      count: 1000,
    },
  });
  const ids = (await tasksSince(ctx, since)).map((t) => t.id);
  const left = await waitEnded(ctx, ids, 120_000);
  const cpu = meter.stop();
  if (left) ctx.log(`volume: ${left} of ${ids.length} tasks did not end`);
  if (load.non2xx + load.errors) ctx.log(`volume: ${load.non2xx + load.errors} starts failed`);
  const total = Object.values(cpu.ms).reduce((a, b) => a + b, 0);
  return total / Math.max(1, ids.length - left);
}

async function figures(ctx: BenchContext, label: string, tasks: number): Promise<Figures> {
  await ctx.topology({ gateways: 1, workers: 0, gatewayEnv: NO_CAPS });
  await ctx.reset();
  const pairs = await pollTargets(ctx);
  const polls = await pollRuns(ctx, pairs, `${label}: tasks/get`, {
    url: ctx.stack.mcpUrl,
    kind: 'poll',
    groups: { gateway: stackGroups(ctx).gateway!, postgres: stackGroups(ctx).postgres! },
  });
  const startP50: number[] = [];
  for (let r = 0; r < ctx.options.runs; r++) {
    await ctx.reset();
    const run = await startRun(ctx, [ctx.stack.mcpUrl], `${label}-s${r}-${Date.now()}`);
    startP50.push(run.load.p50);
    ctx.log(`${label}: starts run ${r + 1}: p50 ${run.load.p50} ms, ${fmt(run.perSecond)}/s`);
  }
  const cpu: number[] = [];
  for (let r = 0; r < ctx.options.runs; r++) {
    cpu.push(await cpuPerTask(ctx, tasks));
    ctx.log(`${label}: CPU per task run ${r + 1}: ${cpu.at(-1)!.toFixed(1)} ms`);
  }
  await ctx.reset();
  return {
    pollP50: polls.p50,
    pollRate: polls.rate,
    startP50: median(startP50),
    cpuPerTask: median(cpu),
  };
}

/** `mcp-task-gateway audit verify --json [args]`: wall time and the process's peak RSS. */
function verify(url: string, args: string[]) {
  return new Promise<{ ok: boolean; events: number; seconds: number; peakMb: number }>(
    (resolve, reject) => {
      const started = performance.now();
      const child = spawn(process.execPath, [CLI, 'audit', 'verify', '--json', ...args], {
        cwd: REPO_ROOT,
        env: { ...process.env, DATABASE_URL: url },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let peakMb = 0;
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.resume();
      // VmHWM is the high-water mark: the last sample before the exit holds the peak.
      const sampler = setInterval(() => {
        // An exited child not yet reaped has a status without memory lines: NaN, skipped.
        const seen = residentMemory(child.pid!)?.peakMb;
        if (seen !== undefined && Number.isFinite(seen)) peakMb = Math.max(peakMb, seen);
      }, 100);
      child.on('error', reject);
      child.on('exit', () => {
        clearInterval(sampler);
        try {
          const report = JSON.parse(out) as { ok: boolean; events: number };
          resolve({
            ok: report.ok,
            events: report.events,
            seconds: (performance.now() - started) / 1000,
            peakMb,
          });
        } catch {
          reject(new Error(`audit verify printed no report: ${out.slice(0, 500)}`));
        }
      });
    },
  );
}

/** One retention sweep with the oldest `expire` seeded tasks past their ttl: time and CPU. */
async function purgeSweep(ctx: BenchContext, pool: pg.Pool, expire: number) {
  const [marked] = await ctx.sql<{ n: number }>(
    `WITH m AS (UPDATE app.tasks SET ttl_ms = 1 WHERE id IN (
       SELECT id FROM app.tasks WHERE tenant LIKE 'vol-%' AND ttl_ms > 1 ORDER BY created_at LIMIT $1)
     RETURNING 1) SELECT count(*)::int AS n FROM m`,
    [expire],
  );
  await ctx.sql('VACUUM ANALYZE app.tasks');
  const meter = cpuMeter({ postgres: () => stackBackends(ctx) });
  const started = performance.now();
  await purgeExpired(pool);
  const ms = performance.now() - started;
  return { removed: marked!.n, ms, postgresMs: meter.stop().ms.postgres ?? 0 };
}

/** What the purge's old predicate (an unindexable expression) costs on the same table. */
async function oldPredicateMs(ctx: BenchContext): Promise<number> {
  const [plan] = await ctx.sql<{ 'QUERY PLAN': Array<{ 'Execution Time': number }> }>(
    `EXPLAIN (ANALYZE, FORMAT JSON) SELECT id FROM app.tasks
      WHERE ended_at IS NOT NULL AND ended_at + ttl_ms * interval '1 millisecond' <= now()`,
  );
  return plan!['QUERY PLAN'][0]!['Execution Time'];
}

export async function benchVolume(ctx: BenchContext): Promise<void> {
  const tasks = setting('BENCH_VOLUME_TASKS', 1_000_000);
  const perTask = setting('BENCH_VOLUME_EVENTS_PER_TASK', 10);
  const batch = Math.max(50, ctx.options.samples * 5);
  const empty = await figures(ctx, 'empty', batch);

  const seeded = await runJsonScript<{
    events: number;
    seconds: number;
    taskBytes: string;
    eventBytes: string;
  }>(SEED, ['--tasks', String(tasks), '--events-per-task', String(perTask), '--days', '30'], {
    env: { ...process.env, DATABASE_URL: ctx.db.url },
    timeoutMs: 4 * 3600_000,
  });
  ctx.log(`volume: seeded ${tasks} tasks, ${seeded.events} events in ${seeded.seconds} s`);
  await sleep(1000);
  const full = await figures(ctx, 'seeded', batch);

  const whole = await verify(ctx.db.url, []);
  const tenant = await verify(ctx.db.url, ['--tenant', 'vol-000']);

  const pool = new pg.Pool({ connectionString: ctx.db.logins.worker, max: 2 });
  const sweeps: Array<{ removed: number; ms: number; postgresMs: number }> = [];
  const oldMs = await oldPredicateMs(ctx);
  for (const expire of [0, 1_000, 10_000]) {
    const sweep = await purgeSweep(ctx, pool, expire);
    sweeps.push(sweep);
    ctx.log(
      `volume: purge of ${sweep.removed}: ${sweep.ms.toFixed(1)} ms, postgres CPU ${sweep.postgresMs.toFixed(0)} ms`,
    );
  }
  await pool.end();

  const within = (a: number, b: number) => b <= a * 1.2;
  const ratio = (a: number, b: number) => `${(b / a).toFixed(2)}×`;
  const history = `${fmt(tasks)} ended tasks, ${fmt(seeded.events)} audit events in 20 tenants over 30 days (${seeded.taskBytes} of tasks and journal, ${seeded.eventBytes} of events)`;
  const samples = `median of ${ctx.options.runs} runs each, empty and seeded`;
  const rows: Array<[string, string, number, number, string]> = [
    ['volume-poll', 'Poll p50 (`tasks/get`, 2026 wire)', empty.pollP50, full.pollP50, 'ms'],
    [
      'volume-start',
      'Start p50 (2026 wire, no worker running)',
      empty.startP50,
      full.startP50,
      'ms',
    ],
    [
      'volume-cpu',
      `CPU per completed task, start → ended, all processes (${batch} tasks, 2 workers)`,
      empty.cpuPerTask,
      full.cpuPerTask,
      'ms',
    ],
  ];
  for (const [goalId, measure, a, b, unit] of rows) {
    ctx.rows.push({
      section: 'Volume',
      goalId,
      measure: `${measure} with ${history}`,
      result: `${fmt(b, 1)} ${unit} (${ratio(a, b)} of empty)`,
      baseline: `empty database: ${fmt(a, 1)} ${unit}`,
      goal: 'within 20 % of empty',
      met: within(a, b),
      samples,
    });
  }
  ctx.rows.push({
    section: 'Volume',
    measure: 'Generating the history (scripts/bench/seed-volume.ts, bulk SQL)',
    result: `${fmt(seeded.seconds)} s`,
    samples: history,
  });
  ctx.rows.push({
    section: 'Volume',
    measure: '`audit verify` of the whole trail',
    result: `${whole.ok ? 'intact' : 'NOT intact'}, ${fmt(whole.events)} events in ${fmt(whole.seconds, 1)} s (${fmt(whole.events / whole.seconds)}/s), peak RSS ${fmt(whole.peakMb)} MB`,
    samples: 'one run, process start included',
  });
  ctx.rows.push({
    section: 'Volume',
    measure: "`audit verify --tenant` of one tenant's month (its chain)",
    result: `${tenant.ok ? 'intact' : 'NOT intact'}, ${fmt(tenant.events)} events in ${fmt(tenant.seconds, 1)} s, peak RSS ${fmt(tenant.peakMb)} MB`,
    samples: 'one run, process start included',
  });
  const perRow = sweeps
    .filter((s) => s.removed > 0)
    .map((s) => `${(s.postgresMs / s.removed).toFixed(3)} ms`);
  ctx.rows.push({
    section: 'Volume',
    measure: `Retention purge sweep over ${fmt(tasks)} retained tasks, by what it removes`,
    result: sweeps
      .map(
        (s) =>
          `${fmt(s.removed)} expired: ${fmt(s.ms, 1)} ms (PostgreSQL CPU ${fmt(s.postgresMs)} ms)`,
      )
      .join('; '),
    baseline: `before migration 190 the sweep's predicate read every retained row: ${fmt(oldMs, 1)} ms to find nothing on this table`,
    goal: `PostgreSQL CPU per removed task ${perRow.join(' and ')}`,
    samples: 'one sweep each, after VACUUM ANALYZE',
  });
}
