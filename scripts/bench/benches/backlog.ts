// A backlog drains: BENCH_BACKLOG_TASKS (100,000) tasks started through the gateway while no
// worker runs, then two workers drain them. Sampled every 5 s meanwhile: completions/s and
// the resident memory of the gateway and the workers; the owner's `tasks/list` latency
// throughout; after it, dead tuples and table sizes of app.tasks and pg-boss's job tables.
import type { BenchContext } from '../lib/context.ts';
import { runLoadProcess } from '../lib/load-client.ts';
import { ListTasksResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectV1 } from '../../../test/support/clients.ts';
import { freePort, residentMemory } from '../lib/process-stack.ts';
import { fmt, median, percentile, sleep } from '../lib/stats.ts';
import { dbNow } from '../lib/task-batches.ts';
import { NO_CAPS } from './throughput.ts';

const STEP_MS = 100;
/** Started hours before the last one runs: deadlines the backlog cannot outlive. */
const LIMITS = JSON.stringify({
  bulk_update_records: { defaultDeadlineMs: 4 * 3600_000, maxDeadlineMs: 4 * 3600_000 },
});

interface Sample {
  atS: number;
  ended: number;
  gatewayMb: number;
  workerMb: number[];
  /** V8's used heap of each worker (its Prometheus endpoint): what it holds, not what it keeps. */
  workerHeapMb: number[];
}

/** A worker's used V8 heap in MB, from the default metrics of its /metrics endpoint. */
async function heapUsedMb(port: number): Promise<number> {
  try {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const m = /^mtg_nodejs_heap_size_used_bytes(?:\{[^}]*\})? (\S+)$/m.exec(text);
    return m ? Number(m[1]) / 2 ** 20 : NaN;
  } catch {
    return NaN;
  }
}

/** Whether the server vacuums on its own: without it, what a drain leaves dead stays. */
async function autovacuum(ctx: BenchContext): Promise<string> {
  const [row] = await ctx.sql<{ setting: string }>(
    `SELECT setting FROM pg_settings WHERE name = 'autovacuum'`,
  );
  return row?.setting ?? 'unknown';
}

async function tableStats(ctx: BenchContext) {
  return ctx.sql<{ name: string; live: number; dead: number; size: string }>(
    `SELECT schemaname || '.' || relname AS name, n_live_tup::int AS live, n_dead_tup::int AS dead,
            pg_size_pretty(pg_total_relation_size(relid)) AS size
       FROM pg_stat_user_tables
      WHERE (schemaname = 'app' AND relname IN ('tasks', 'task_steps', 'task_credentials'))
         OR (schemaname = 'pgboss' AND relname LIKE 'job%')
      ORDER BY 1`,
  );
}

export async function benchBacklog(ctx: BenchContext): Promise<void> {
  const total = Number(process.env.BENCH_BACKLOG_TASKS ?? 100_000);
  if (!Number.isInteger(total) || total < 1)
    throw new Error('BENCH_BACKLOG_TASKS must be a positive integer');
  const env = { ...NO_CAPS, TOOL_LIMITS: LIMITS };
  await ctx.topology({ gateways: 1, workers: 0, gatewayEnv: env });
  await ctx.reset();
  const since = await dbNow(ctx);
  const queued = performance.now();
  const load = await runLoadProcess({
    urls: [ctx.stack.mcpUrl],
    connections: 20,
    durationS: 4 * 3600,
    amount: total,
    scenario: {
      kind: 'start',
      tokens: ctx.users.map((u) => u.token),
      runTag: `backlog-${Date.now()}`,
    },
  });
  const queueS = (performance.now() - queued) / 1000;
  const [{ n: backlog } = { n: 0 }] = await ctx.sql<{ n: number }>(
    `SELECT count(*)::int AS n FROM app.tasks WHERE created_at >= $1`,
    [since],
  );
  ctx.log(
    `backlog: ${backlog} tasks queued in ${fmt(queueS)} s (${load.non2xx + load.errors} failed starts)`,
  );

  // Started here, not by ctx.topology, to give each its own metrics port (the next bench's
  // topology restarts them as it needs them).
  const metricsPorts = [await freePort(), await freePort()];
  await Promise.all(
    metricsPorts.map((port, i) =>
      ctx.stack.startWorker(`worker-${i + 1}`, {
        DEMO_STEP_MS: String(STEP_MS),
        TOOL_LIMITS: LIMITS,
        WORKER_METRICS_PORT: String(port),
      }),
    ),
  );
  const started = performance.now();
  const samples: Sample[] = [];
  const listMs: number[] = [];
  let draining = true;
  const owner = ctx.users[0]!;
  // tasks/list is a 2025-11-25 verb (the 2026 extension has none): the v1 SDK's client.
  const client = await connectV1(ctx.stack.mcpUrl, owner.token);
  let listFailures = 0;
  const lister = (async () => {
    while (draining) {
      const t0 = performance.now();
      try {
        await client.request({ method: 'tasks/list', params: {} }, ListTasksResultSchema);
        listMs.push(performance.now() - t0);
      } catch {
        listFailures++;
      }
      await sleep(200);
    }
    await client.close();
  })();
  const ended = async () =>
    (
      await ctx.sql<{ n: number }>(
        `SELECT count(*)::int AS n FROM app.tasks WHERE created_at >= $1 AND ended_at IS NOT NULL`,
        [since],
      )
    )[0]!.n;
  for (;;) {
    const n = await ended();
    samples.push({
      atS: (performance.now() - started) / 1000,
      ended: n,
      gatewayMb: residentMemory(ctx.stack.gateways[0]!.pid)?.rssMb ?? NaN,
      workerMb: [...ctx.stack.workers.values()].map((w) => residentMemory(w.pid)?.rssMb ?? NaN),
      workerHeapMb: await Promise.all(metricsPorts.map(heapUsedMb)),
    });
    if (n >= backlog) break;
    const last = samples.at(-1)!;
    const before = samples.at(-13);
    if (before && before.ended === last.ended) {
      ctx.log(`backlog: no progress for a minute at ${n} of ${backlog}; stopping`);
      break;
    }
    await sleep(5000);
  }
  draining = false;
  await lister;
  const drainS = (performance.now() - started) / 1000;
  const rates = samples
    .slice(1)
    .map((s, i) => (s.ended - samples[i]!.ended) / (s.atS - samples[i]!.atS));
  // The middle of the drain: past the workers' start, before the last tasks trickle out.
  const middle = rates.slice(Math.floor(rates.length * 0.1), Math.ceil(rates.length * 0.9));
  const [{ n: completed } = { n: 0 }] = await ctx.sql<{ n: number }>(
    `SELECT count(*)::int AS n FROM app.tasks WHERE created_at >= $1 AND status = 'completed'`,
    [since],
  );
  const quarter = (f: (s: Sample) => number) =>
    [0, 0.25, 0.5, 0.75, 1]
      .map((q) =>
        fmt(f(samples[Math.min(samples.length - 1, Math.round(q * (samples.length - 1)))]!)),
      )
      .join(' → ');
  const stats = await tableStats(ctx);
  await ctx.reset();
  const samplesNote = `${fmt(backlog)} tasks (2-step tool, ${STEP_MS} ms steps) queued through the gateway in ${fmt(queueS)} s with no worker, then 2 workers`;
  ctx.rows.push({
    section: 'Backlog',
    measure: 'Backlog drain: completions/s sustained by 2 workers',
    result: `${fmt(median(middle), 1)}/s (min–max over 5 s samples ${fmt(Math.min(...middle), 1)}–${fmt(Math.max(...middle), 1)}); ${fmt(completed)} of ${fmt(backlog)} completed in ${fmt(drainS)} s`,
    samples: samplesNote,
  });
  ctx.rows.push({
    section: 'Backlog',
    measure: 'Resident memory over the drain (start → ¼ → ½ → ¾ → end)',
    result: `gateway ${quarter((s) => s.gatewayMb)} MB; workers ${quarter((s) => Math.max(...s.workerMb))} MB (the larger of the two); the workers' used V8 heap ${quarter((s) => Math.max(...s.workerHeapMb))} MB (the larger of the two: what they hold, where the resident size also counts what V8 and the allocator keep)`,
    samples: `VmRSS every 5 s, ${samples.length} samples`,
  });
  ctx.rows.push({
    section: 'Backlog',
    measure: "The owner's `tasks/list` during the drain",
    result: `p50 ${fmt(median(listMs), 1)} ms, p99 ${fmt(percentile(listMs, 99), 1)} ms`,
    samples: `${listMs.length} requests on the 2025-11-25 wire (v1 SDK client), one every 200 ms${listFailures ? `, ${listFailures} failed` : ''}`,
  });
  ctx.rows.push({
    section: 'Backlog',
    measure: 'Tables after the drain (live rows, dead tuples, total size)',
    result: stats
      .map((s) => `${s.name} ${fmt(s.live)} live, ${fmt(s.dead)} dead, ${s.size}`)
      .join('; '),
    samples: `pg_stat_user_tables right after the last task ended (the server's autovacuum ${await autovacuum(ctx)})`,
  });
}
