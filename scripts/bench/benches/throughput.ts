// Task starts/s and polls/s through the gateway, each against a baseline measured in the
// same run; memory under 200 polling clients.
import { fileURLToPath } from 'node:url';
import type { BenchContext } from '../lib/context.ts';
import { runJsonScript } from '../lib/child-json.ts';
import { runLoadProcess } from '../lib/load-client.ts';
import { startTask } from '../lib/mcp.ts';
import { cpuMeter, describeCpu, stackBackends, type PidSource } from '../lib/cpu.ts';
import { freePort, residentMemory, spawnProc } from '../lib/process-stack.ts';
import { fmt, median, sleep } from '../lib/stats.ts';

const script = (name: string) => fileURLToPath(new URL(`../${name}`, import.meta.url));

/** Caps high enough that only the locks, not the limits, act during the load. */
export const NO_CAPS = {
  MAX_ACTIVE_TASKS_PER_USER: '1000000',
  MAX_ACTIVE_TASKS_PER_TENANT: '1000000',
};

async function countTasks(ctx: BenchContext): Promise<number> {
  const [r] = await ctx.sql<{ n: number }>('SELECT count(*)::int AS n FROM app.tasks');
  return r!.n;
}

/** The stack's processes, grouped by kind, for CPU accounting. */
export function stackGroups(ctx: BenchContext): Record<string, PidSource> {
  const live = (ps: Array<{ pid: number; running(): boolean } | undefined>) => () =>
    ps.filter((p) => p?.running()).map((p) => p!.pid);
  return {
    gateway: live(ctx.stack.gateways),
    workers: live([...ctx.stack.workers.values()]),
    idp: live([ctx.stack.idp]),
    downstream: live([ctx.stack.downstream]),
    postgres: () => stackBackends(ctx),
  };
}

/** A short unmeasured load first, so JIT compilation and connection pools are warm. */
async function warmUp(
  ctx: BenchContext,
  url: string,
  scenario: Parameters<typeof runLoadProcess>[0]['scenario'],
) {
  await runLoadProcess({
    urls: [url],
    connections: ctx.options.connections,
    durationS: Math.min(3, ctx.options.durationS),
    scenario,
  });
}

/** One run of start load; returns tasks created per second (counted in the database). */
export async function startRun(ctx: BenchContext, urls: string[], tag: string) {
  const before = await countTasks(ctx);
  const meter = cpuMeter(stackGroups(ctx));
  const load = await runLoadProcess({
    urls,
    connections: ctx.options.connections,
    durationS: ctx.options.durationS,
    scenario: { kind: 'start', tokens: ctx.users.map((u) => u.token), runTag: tag },
  });
  const cpu = meter.stop();
  const created = (await countTasks(ctx)) - before;
  return {
    load,
    created,
    perSecond: created / load.durationS,
    cpu: describeCpu(cpu, created, 'start', { load: load.cpuMs }),
  };
}

export async function benchStarts(ctx: BenchContext): Promise<void> {
  const { runs, durationS, connections } = ctx.options;
  await ctx.topology({ gateways: 1, workers: 0, gatewayEnv: NO_CAPS });
  const gateway: number[] = [];
  const p50: number[] = [];
  const p99: number[] = [];
  let failures = 0;
  let cpu = '';
  await warmUp(ctx, ctx.stack.mcpUrl, {
    kind: 'start',
    tokens: ctx.users.map((u) => u.token),
    runTag: `warm-${Date.now()}`,
  });
  for (let r = 0; r < runs; r++) {
    await ctx.reset();
    const run = await startRun(ctx, [ctx.stack.mcpUrl], `s${r}-${Date.now()}`);
    cpu = run.cpu;
    gateway.push(run.perSecond);
    p50.push(run.load.p50);
    p99.push(run.load.p99);
    failures += run.load.non2xx + run.load.errors + run.load.rpcErrors;
    ctx.log(
      `starts run ${r + 1}: ${fmt(run.perSecond)}/s (${run.created} tasks, p50 ${run.load.p50} ms, p99 ${run.load.p99} ms, failed ${run.load.non2xx + run.load.errors + run.load.rpcErrors}); ${run.cpu}`,
    );
  }
  const baseline: number[] = [];
  let baselineCpu = '';
  for (let r = 0; r < runs; r++) {
    const meter = cpuMeter({});
    const b = await runJsonScript<{
      perSecond: number;
      sent: number;
      p50: number;
      p99: number;
      cpuMs: number;
      postgresMs: number;
    }>(script('pgboss-send.ts'), [
      ctx.db.url,
      `bench-baseline-${r}`,
      String(connections),
      String(durationS),
    ]);
    baselineCpu = describeCpu(meter.stop(), b.sent, 'send', {
      'sender (pg-boss client)': b.cpuMs,
      postgres: b.postgresMs,
    });
    baseline.push(b.perSecond);
    ctx.log(
      `pg-boss send run ${r + 1}: ${fmt(b.perSecond)}/s (p50 ${b.p50.toFixed(1)} ms); ${baselineCpu}`,
    );
  }
  await ctx.reset();
  const ratio = median(gateway) / median(baseline);
  ctx.rows.push({
    section: 'Throughput',
    measure:
      'Diagnostic: task starts/s with no worker running (2026 wire: auth, delegation exchange, task row, job, audit; nothing runs the tasks)',
    result: `${fmt(median(gateway))}/s (p50 ${fmt(median(p50))} ms, p99 ${fmt(median(p99))} ms)`,
    baseline: `raw pg-boss send(), ${connections} concurrent: ${fmt(median(baseline))}/s, ratio ${ratio.toFixed(2)} (last run: ${baselineCpu})`,
    samples: `median of ${runs} × ${durationS} s, ${connections} connections, 32 users in 8 tenants${failures ? `, ${failures} failed requests` : ''}`,
    note: `last run: ${cpu}`,
  });
}

/** Two tasks per user, left `working` (no workers), as the targets of polls. */
export async function pollTargets(ctx: BenchContext) {
  const pairs: Array<{ token: string; taskId: string }> = [];
  for (const u of ctx.users) {
    for (let i = 0; i < 2; i++) {
      const taskId = await startTask(ctx.stack.mcpUrl, u.token, 'bulk_update_records', {
        collection: 'poll-target',
        count: 500,
        patch: { i, sub: u.sub },
      });
      pairs.push({ token: u.token, taskId });
    }
  }
  return pairs;
}

type PollTarget = {
  url: string;
  kind: 'poll' | 'poll-2025' | 'poll-job' | 'baseline-poll';
  groups: Record<string, PidSource>;
};

/** One measured run of polls against `target`. */
async function pollOnce(
  ctx: BenchContext,
  pairs: Array<{ token: string; taskId: string }>,
  label: string,
  target: PollTarget,
  run: number,
) {
  const meter = cpuMeter(target.groups);
  const load = await runLoadProcess({
    urls: [target.url],
    connections: ctx.options.connections,
    durationS: ctx.options.durationS,
    scenario: { kind: target.kind, pairs },
  });
  const cpu = describeCpu(meter.stop(), load.requests, 'poll', { load: load.cpuMs });
  const failed = load.non2xx + load.errors + load.rpcErrors;
  ctx.log(
    `${label} run ${run + 1}: ${fmt(load.perSecond)}/s (p50 ${load.p50} ms, p99 ${load.p99} ms, failed ${failed}); ${cpu}`,
  );
  return { rate: load.perSecond, p50: load.p50, p99: load.p99, failed, cpu };
}
type PollRun = Awaited<ReturnType<typeof pollOnce>>;

/** Medians over runs (the CPU split of the last run). */
function pollSummary(runs: PollRun[]) {
  return {
    rate: median(runs.map((r) => r.rate)),
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
    failures: runs.reduce((n, r) => n + r.failed, 0),
    cpu: runs.at(-1)?.cpu ?? '',
  };
}

export async function pollRuns(
  ctx: BenchContext,
  pairs: Array<{ token: string; taskId: string }>,
  label: string,
  target: PollTarget,
) {
  await warmUp(ctx, target.url, { kind: target.kind, pairs });
  const runs: PollRun[] = [];
  for (let r = 0; r < ctx.options.runs; r++)
    runs.push(await pollOnce(ctx, pairs, label, target, r));
  return pollSummary(runs);
}

/**
 * The baseline and the goal's wires run in turn, round by round (each round in a rotated
 * order), and each wire's ratio is the
 * median of its per-round ratios: measured one block after another, a ratio compared runs
 * minutes apart, and on shared cores the machine's speed drifts over minutes (a block measured
 * in a slow minute made a poll look faster than the bare endpoint).
 */
async function interleavedPollRounds(
  ctx: BenchContext,
  pairs: Array<{ token: string; taskId: string }>,
  targets: Record<string, { label: string; target: PollTarget }>,
) {
  const names = Object.keys(targets);
  for (const n of names)
    await warmUp(ctx, targets[n]!.target.url, { kind: targets[n]!.target.kind, pairs });
  const runs: Record<string, PollRun[]> = Object.fromEntries(names.map((n) => [n, []]));
  // Each round starts one further along the list, so no target always runs first or last.
  for (let r = 0; r < ctx.options.runs; r++)
    for (const n of [...names.slice(r % names.length), ...names.slice(0, r % names.length)])
      runs[n]!.push(await pollOnce(ctx, pairs, targets[n]!.label, targets[n]!.target, r));
  return runs;
}

/** A wire's ratio to the baseline: per round, then the median and the spread. */
function ratioOf(wire: PollRun[], baseline: PollRun[]) {
  const ratios = wire.map((w, i) => w.rate / baseline[i]!.rate);
  const m = median(ratios);
  return {
    median: m,
    text: `ratio ${m.toFixed(2)} (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)} over ${ratios.length} rounds, each run beside a baseline run; goal ≥ 0.8)`,
  };
}

export async function benchPolls(ctx: BenchContext): Promise<void> {
  const { runs, durationS, connections } = ctx.options;
  await ctx.topology({ gateways: 1, workers: 0, gatewayEnv: NO_CAPS });
  await ctx.reset();
  const pairs = await pollTargets(ctx);
  const gatewayTarget = () => ({
    url: ctx.stack.mcpUrl,
    kind: 'poll' as const,
    groups: { gateway: stackGroups(ctx).gateway!, postgres: stackGroups(ctx).postgres! },
  });
  const port = await freePort();
  const baselineProc = spawnProc(
    'baseline',
    'gateway',
    script('baseline-server.ts'),
    {
      ...process.env,
      PORT: String(port),
      DATABASE_URL: ctx.db.logins.gateway,
      ISSUER: ctx.stack.idpUrl,
      AUDIENCE: ctx.stack.mcpUrl,
    },
    `${ctx.stack.dataDir}/logs/baseline.log`,
  );
  await baselineProc.ready;
  const rounds = await interleavedPollRounds(ctx, pairs, {
    baseline: {
      label: 'baseline poll',
      target: {
        url: `http://127.0.0.1:${port}`,
        kind: 'baseline-poll',
        groups: { baseline: () => [baselineProc.pid], postgres: stackGroups(ctx).postgres! },
      },
    },
    gateway: { label: 'tasks/get', target: gatewayTarget() },
    wire2025: {
      label: 'tasks/get (2025-11-25)',
      target: { ...gatewayTarget(), kind: 'poll-2025' },
    },
    jobs: { label: 'get_job_status', target: { ...gatewayTarget(), kind: 'poll-job' } },
  });
  await baselineProc.stop();
  const base = pollSummary(rounds.baseline!);
  const gateway = pollSummary(rounds.gateway!);
  const wire2025 = pollSummary(rounds.wire2025!);
  const jobs = pollSummary(rounds.jobs!);

  // The same polls with every status read appended to the trail (STATUS_READ_AUDIT=all): what
  // the default (the first read of each status by each caller) saves a poll loop.
  await ctx.topology({
    gateways: 1,
    workers: 0,
    gatewayEnv: { ...NO_CAPS, STATUS_READ_AUDIT: 'all' },
  });
  const everyRead = await pollRuns(ctx, pairs, 'tasks/get (every read audited)', gatewayTarget());

  // The 2025-11-25 polls through the SDK's per-request server (TASKS_GET_FAST_PATH=off), as
  // every 2025 poll went before its fast path.
  await ctx.topology({
    gateways: 1,
    workers: 0,
    gatewayEnv: { ...NO_CAPS, TASKS_GET_FAST_PATH: 'off' },
  });
  const sdk2025 = await pollRuns(ctx, pairs, 'tasks/get (2025-11-25, through the SDK)', {
    ...gatewayTarget(),
    kind: 'poll-2025',
  });

  // The same polls with every token's signature checked again (AUTH_TOKEN_CACHE_MS=0), as the
  // baseline does.
  await ctx.topology({
    gateways: 1,
    workers: 0,
    gatewayEnv: { ...NO_CAPS, AUTH_TOKEN_CACHE_MS: '0' },
  });
  const uncached = await pollRuns(ctx, pairs, 'tasks/get (no token cache)', gatewayTarget());

  await ctx.topology({ gateways: 1, workers: 0, gatewayEnv: NO_CAPS });
  await ctx.reset();

  const baseline = base.rate;
  const samples = `median of ${runs} × ${durationS} s, ${connections} connections, ${pairs.length} tasks of 32 users`;
  const roundSamples = `median of ${runs} rounds of ${durationS} s each for the baseline and the three wires in turn, ${connections} connections, ${pairs.length} tasks of 32 users`;
  const gatewayRatio = ratioOf(rounds.gateway!, rounds.baseline!);
  ctx.rows.push({
    section: 'Throughput',
    goalId: 'poll-ratio',
    measure:
      'Task polls/s: `tasks/get` on the 2026 wire (STATUS_READ_AUDIT=first-per-change, the default)',
    result: `${fmt(gateway.rate)}/s (p50 ${fmt(gateway.p50)} ms, p99 ${fmt(gateway.p99)} ms)`,
    baseline: `Express + jose verify + PK SELECT: ${fmt(baseline)}/s (p50 ${fmt(base.p50)} ms; ${base.cpu})`,
    goal: gatewayRatio.text,
    met: gatewayRatio.median >= 0.8,
    samples:
      roundSamples +
      (gateway.failures ? `, ${gateway.failures} failed` : '') +
      (base.failures ? `; baseline ${base.failures} failed` : ''),
    note: `last run: ${gateway.cpu}`,
  });
  for (const [goalId, measure, r, ratio] of [
    [
      'poll-ratio-2025',
      'Task polls/s: `tasks/get` on the 2025-11-25 wire (stateless, as the v1 SDK sends it after `initialize`)',
      wire2025,
      ratioOf(rounds.wire2025!, rounds.baseline!),
    ],
    [
      'poll-ratio-jobs',
      "Job polls/s: the job tools' `get_job_status` (tools/call on the 2025-11-25 wire, for clients without tasks)",
      jobs,
      ratioOf(rounds.jobs!, rounds.baseline!),
    ],
  ] as const) {
    ctx.rows.push({
      section: 'Throughput',
      goalId,
      measure,
      result: `${fmt(r.rate)}/s (p50 ${fmt(r.p50)} ms, p99 ${fmt(r.p99)} ms)`,
      baseline: `same baseline: ${fmt(baseline)}/s`,
      goal: ratio.text,
      met: ratio.median >= 0.8,
      samples: roundSamples + (r.failures ? `, ${r.failures} failed` : ''),
      note: `last run: ${r.cpu}`,
    });
  }
  ctx.rows.push({
    section: 'Throughput',
    measure: 'Task polls/s: `tasks/get` with STATUS_READ_AUDIT=all (for comparison)',
    result: `${fmt(everyRead.rate)}/s (p50 ${fmt(everyRead.p50)} ms, p99 ${fmt(everyRead.p99)} ms)`,
    baseline: `same baseline: ${fmt(baseline)}/s, ratio ${(everyRead.rate / baseline).toFixed(2)}`,
    samples: samples + (everyRead.failures ? `, ${everyRead.failures} failed` : ''),
    note: `last run: ${everyRead.cpu}`,
  });
  ctx.rows.push({
    section: 'Throughput',
    measure:
      "Task polls/s: `tasks/get` on the 2025-11-25 wire with TASKS_GET_FAST_PATH=off (through the v1 SDK's per-request server, as before its fast path; for comparison)",
    result: `${fmt(sdk2025.rate)}/s (p50 ${fmt(sdk2025.p50)} ms, p99 ${fmt(sdk2025.p99)} ms)`,
    baseline: `same baseline: ${fmt(baseline)}/s, ratio ${(sdk2025.rate / baseline).toFixed(2)}`,
    samples: samples + (sdk2025.failures ? `, ${sdk2025.failures} failed` : ''),
    note: `last run: ${sdk2025.cpu}`,
  });
  ctx.rows.push({
    section: 'Throughput',
    measure:
      'Task polls/s: `tasks/get` with AUTH_TOKEN_CACHE_MS=0 (every signature checked, as the baseline does; for comparison)',
    result: `${fmt(uncached.rate)}/s (p50 ${fmt(uncached.p50)} ms, p99 ${fmt(uncached.p99)} ms)`,
    baseline: `same baseline: ${fmt(baseline)}/s, ratio ${(uncached.rate / baseline).toFixed(2)}`,
    samples: samples + (uncached.failures ? `, ${uncached.failures} failed` : ''),
    note: `last run: ${uncached.cpu}`,
  });
}

export async function benchMemory(ctx: BenchContext): Promise<void> {
  const durationS = Math.max(ctx.options.durationS, 10);
  await ctx.topology({
    gateways: 1,
    workers: 2,
    gatewayEnv: NO_CAPS,
    workerEnv: { DEMO_STEP_MS: '1000' },
  });
  await ctx.reset();
  // Working workers (20 long tasks, a 1 s step each) while the clients poll them.
  const pairs: Array<{ token: string; taskId: string }> = [];
  for (const u of ctx.users.slice(0, 20)) {
    const taskId = await startTask(ctx.stack.mcpUrl, u.token, 'bulk_update_records', {
      collection: 'memory',
      count: 100_000,
      patch: { sub: u.sub },
    });
    pairs.push({ token: u.token, taskId });
  }
  await sleep(1000);
  const gateway = ctx.stack.gateways[0]!;
  const workers = [...ctx.stack.workers.values()];
  const before = {
    gateway: residentMemory(gateway.pid)!,
    workers: workers.map((w) => residentMemory(w.pid)!),
  };
  let peakGateway = 0;
  const peakWorkers = workers.map(() => 0);
  const sampler = setInterval(() => {
    peakGateway = Math.max(peakGateway, residentMemory(gateway.pid)?.rssMb ?? 0);
    workers.forEach(
      (w, i) => (peakWorkers[i] = Math.max(peakWorkers[i]!, residentMemory(w.pid)?.rssMb ?? 0)),
    );
  }, 250);
  const load = await runLoadProcess({
    urls: [ctx.stack.mcpUrl],
    connections: 200,
    durationS,
    scenario: { kind: 'poll', pairs },
  });
  const firstPeak = peakGateway;
  // A second round of the same: a plateau means the heap sized itself to the load; growth
  // again by as much would mean memory held per request.
  peakGateway = 0;
  await runLoadProcess({
    urls: [ctx.stack.mcpUrl],
    connections: 200,
    durationS,
    scenario: { kind: 'poll', pairs },
  });
  clearInterval(sampler);
  const after = residentMemory(gateway.pid)!;
  ctx.log(
    `memory: gateway ${before.gateway.rssMb.toFixed(0)} → peak ${firstPeak.toFixed(0)} → ${peakGateway.toFixed(0)} MB; workers peak ${peakWorkers.map((m) => m.toFixed(0)).join('/')} MB; ${fmt(load.perSecond)} polls/s, p99 ${load.p99} ms`,
  );
  await ctx.reset();
  ctx.rows.push({
    section: 'Memory',
    measure: 'Gateway resident memory under 200 concurrent polling clients',
    result: `peak ${fmt(firstPeak)} MB in a first round, ${fmt(peakGateway)} MB in a second (idle ${fmt(before.gateway.rssMb)} MB; ${fmt(after.rssMb)} MB after)`,
    samples: `2 × ${durationS} s, 200 connections, first round: ${fmt(load.perSecond)} polls/s, p99 ${fmt(load.p99)} ms${load.non2xx + load.errors + load.timeouts ? `, ${load.non2xx} non-2xx, ${load.errors} errors, ${load.timeouts} timeouts` : ''}`,
    note: 'VmRSS sampled every 250 ms from /proc',
  });
  ctx.rows.push({
    section: 'Memory',
    measure: 'Worker resident memory meanwhile (2 workers running 20 long tasks, 1 s steps)',
    result: `peak ${peakWorkers.map((m) => fmt(m)).join(' / ')} MB (idle ${before.workers.map((m) => fmt(m.rssMb)).join(' / ')} MB)`,
    samples: 'same run',
  });
}
