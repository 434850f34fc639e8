// Memory per connection and per task: the gateway's resident set under 1,000 concurrent
// polling connections against the same gateway under 10, and one worker's with 200 tasks
// running (WORKER_CONCURRENCY's maximum) against one; the differences divided by connections
// and by tasks. The gateway's sides are peaks under their loads; the worker's are the median
// of a 10 s window each, so where garbage collection stands at one reading does not decide
// the figure (a running task waiting on its step holds little: one reading moved the old
// 20-task figure by more than the tasks did). Each round starts both processes fresh, so no
// earlier bench's or round's heap is in a reading.
import type { BenchContext } from '../lib/context.ts';
import { runLoadProcess } from '../lib/load-client.ts';
import { startTask } from '../lib/mcp.ts';
import { residentMemory } from '../lib/process-stack.ts';
import { fmt, median, medianSpread, sleep } from '../lib/stats.ts';
import { NO_CAPS } from './throughput.ts';

const CONNECTIONS = 1000;
/** The reference: enough to warm the gateway's code and pools, too few to need memory of their own. */
const FEW = 10;
/** The worker's slots: the default's full (20), then every slot the worker allows (200). */
const DEFAULT_SLOTS = 20;
const SLOTS = 200;
/** How long the worker is sampled at each count, and how long after its tasks started. */
const WORKER_WINDOW_MS = 10_000;
const SETTLE_MS = 3000;

/** VmRSS of `pid` sampled every 250 ms while `work` runs: the peak and the median. */
async function rssDuring(
  pid: number,
  work: Promise<unknown>,
): Promise<{ peak: number; median: number }> {
  const samples = [residentMemory(pid)?.rssMb ?? 0];
  const sampler = setInterval(() => samples.push(residentMemory(pid)?.rssMb ?? 0), 250);
  try {
    await work;
  } finally {
    clearInterval(sampler);
  }
  return { peak: Math.max(...samples), median: median(samples) };
}

interface Round {
  perConnectionKb: number;
  perTaskKb: number;
  started: { gateway: number; worker: number };
  gateway: { few: number; many: number };
  worker: { one: number; defaultFull: number; full: number; running: number };
  polls: { few: number; many: number; p99Many: number; failed: number };
}

async function measureRound(ctx: BenchContext, durationS: number): Promise<Round> {
  await ctx.topology({
    gateways: 1,
    workers: 1,
    gatewayEnv: NO_CAPS,
    // Steps of 5 s: 200 tasks make 40 steps a second, so the machine is not what they wait on.
    workerEnv: { DEMO_STEP_MS: '5000', WORKER_CONCURRENCY: String(SLOTS) },
    fresh: true,
  });
  await ctx.reset();
  const gateway = ctx.stack.gateways[0]!;
  const worker = [...ctx.stack.workers.values()][0]!;
  await sleep(2000);
  const started = {
    gateway: residentMemory(gateway.pid)!.rssMb,
    worker: residentMemory(worker.pid)!.rssMb,
  };

  // One task first (the worker's reference: its code has run once), then the default's slots
  // full, then every slot; long steps. The worker's median over a window at each count.
  const pairs: Array<{ token: string; taskId: string }> = [];
  const startUpTo = async (n: number) => {
    for (let i = pairs.length; i < n; i++) {
      const u = ctx.users[i % ctx.users.length]!;
      const taskId = await startTask(ctx.stack.mcpUrl, u.token, 'bulk_update_records', {
        collection: 'footprint',
        count: 100_000,
        patch: { i },
      });
      pairs.push({ token: u.token, taskId });
    }
    await sleep(SETTLE_MS);
    return (await rssDuring(worker.pid, sleep(WORKER_WINDOW_MS))).median;
  };
  const workerOne = await startUpTo(1);
  const workerDefaultFull = await startUpTo(DEFAULT_SLOTS);
  const workerFull = await startUpTo(SLOTS);
  const [{ n: running } = { n: 0 }] = await ctx.sql<{ n: number }>(
    `SELECT count(*)::int AS n FROM app.tasks WHERE status = 'working' AND lease_owner IS NOT NULL`,
  );

  // Each load twice, measured the second time: V8 grows its heap to a load once. The few
  // connections first, so the difference is what the many add, not the code's first run.
  const poll = (connections: number) =>
    runLoadProcess({
      urls: [ctx.stack.mcpUrl],
      connections,
      durationS,
      scenario: { kind: 'poll', pairs },
    });
  const peakOfSecond = async (connections: number) => {
    await poll(connections);
    const measured = poll(connections);
    const { peak } = await rssDuring(gateway.pid, measured);
    return { peak, load: await measured };
  };
  const few = await peakOfSecond(FEW);
  const many = await peakOfSecond(CONNECTIONS);
  await ctx.reset();
  return {
    perConnectionKb: ((many.peak - few.peak) * 1024) / (CONNECTIONS - FEW),
    perTaskKb: ((workerFull - workerOne) * 1024) / Math.max(1, running - 1),
    started,
    gateway: { few: few.peak, many: many.peak },
    worker: { one: workerOne, defaultFull: workerDefaultFull, full: workerFull, running },
    polls: {
      few: few.load.perSecond,
      many: many.load.perSecond,
      p99Many: many.load.p99,
      failed: many.load.non2xx + many.load.errors + many.load.timeouts,
    },
  };
}

export async function benchFootprint(ctx: BenchContext): Promise<void> {
  const durationS = Math.max(ctx.options.durationS, 10);
  const rounds: Round[] = [];
  for (let i = 0; i < ctx.options.runs; i++) rounds.push(await measureRound(ctx, durationS));
  const mid = (pick: (r: Round) => number, digits = 0) => fmt(median(rounds.map(pick)), digits);
  const failed = rounds.reduce((n, r) => n + r.polls.failed, 0);
  ctx.rows.push({
    section: 'Memory',
    measure: `Gateway resident memory per polling connection (${fmt(CONNECTIONS)} concurrent connections polling \`tasks/get\`, against ${FEW} on the same gateway)`,
    result: `${medianSpread(
      rounds.map((r) => r.perConnectionKb),
      1,
    )} kB per connection (medians: peak ${mid((r) => r.gateway.few)} MB with ${FEW}, ${mid((r) => r.gateway.many)} MB with ${fmt(CONNECTIONS)}; ${mid((r) => r.started.gateway)} MB when started)`,
    samples: `${rounds.length} rounds, each on a gateway started for it: the second of 2 × ${durationS} s loads of each; medians ${mid((r) => r.polls.few)} and ${mid((r) => r.polls.many)} polls/s, p99 with ${fmt(CONNECTIONS)} ${mid((r) => r.polls.p99Many)} ms${failed ? `, ${failed} failed` : ''}`,
    note: 'VmRSS sampled every 250 ms',
  });
  ctx.rows.push({
    section: 'Memory',
    measure: `Worker resident memory per running task (one worker, ${SLOTS} slots full against 1 running, 5 s steps)`,
    result: `${medianSpread(
      rounds.map((r) => r.perTaskKb),
      1,
    )} kB per task (medians: ${mid((r) => r.worker.one)} MB with 1 running, ${mid((r) => r.worker.defaultFull)} MB with ${DEFAULT_SLOTS} (the default's slots full), ${mid((r) => r.worker.full)} MB with ${mid((r) => r.worker.running)}; ${mid((r) => r.started.worker)} MB when started)`,
    samples: `the same rounds: at each count the median of ${WORKER_WINDOW_MS / 1000} s, ${SETTLE_MS / 1000} s after its tasks started`,
    note: 'VmRSS sampled every 250 ms',
  });
}
