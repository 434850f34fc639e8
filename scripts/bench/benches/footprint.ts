// Memory per connection and per task: the gateway's resident set under 1,000 concurrent
// polling connections against the same gateway under 10, and one worker's with every slot
// running a long task against one; the differences divided by connections and by tasks. Each
// round starts both processes fresh, so no earlier bench's or round's heap is in a reading.
import type { BenchContext } from '../lib/context.ts';
import { runLoadProcess } from '../lib/load-client.ts';
import { startTask } from '../lib/mcp.ts';
import { residentMemory } from '../lib/process-stack.ts';
import { fmt, median, medianSpread, sleep } from '../lib/stats.ts';
import { NO_CAPS } from './throughput.ts';

const CONNECTIONS = 1000;
/** The reference: enough to warm the gateway's code and pools, too few to need memory of their own. */
const FEW = 10;
const SLOTS = 20;

/** Peak VmRSS of `pid` while `work` runs, sampled every 250 ms. */
async function peakDuring(pid: number, work: Promise<unknown>): Promise<number> {
  let peak = residentMemory(pid)?.rssMb ?? 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, residentMemory(pid)?.rssMb ?? 0);
  }, 250);
  try {
    await work;
  } finally {
    clearInterval(sampler);
  }
  return peak;
}

interface Round {
  perConnectionKb: number;
  perTaskKb: number;
  started: { gateway: number; worker: number };
  gateway: { few: number; many: number };
  worker: { one: number; full: number; running: number };
  polls: { few: number; many: number; p99Many: number; failed: number };
}

async function measureRound(ctx: BenchContext, durationS: number): Promise<Round> {
  await ctx.topology({
    gateways: 1,
    workers: 1,
    gatewayEnv: NO_CAPS,
    workerEnv: { DEMO_STEP_MS: '1000', WORKER_CONCURRENCY: String(SLOTS) },
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

  // One task first, read once it runs (the worker's reference: its code has run once), then
  // every slot busy and as many tasks again queued behind them; long steps.
  const pairs: Array<{ token: string; taskId: string }> = [];
  const start = async (i: number) => {
    const u = ctx.users[i % ctx.users.length]!;
    const taskId = await startTask(ctx.stack.mcpUrl, u.token, 'bulk_update_records', {
      collection: 'footprint',
      count: 100_000,
      patch: { i },
    });
    pairs.push({ token: u.token, taskId });
  };
  await start(0);
  await sleep(3000);
  const workerOne = residentMemory(worker.pid)!.rssMb;
  for (let i = 1; i < SLOTS * 2; i++) await start(i);
  await sleep(3000);
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
    const peak = await peakDuring(gateway.pid, measured);
    return { peak, load: await measured };
  };
  const few = await peakOfSecond(FEW);
  const many = await peakOfSecond(CONNECTIONS);
  const workerFull = residentMemory(worker.pid)!.rssMb;
  await ctx.reset();
  return {
    perConnectionKb: ((many.peak - few.peak) * 1024) / (CONNECTIONS - FEW),
    perTaskKb: ((workerFull - workerOne) * 1024) / Math.max(1, running - 1),
    started,
    gateway: { few: few.peak, many: many.peak },
    worker: { one: workerOne, full: workerFull, running },
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
    measure: `Worker resident memory per running task (one worker, ${SLOTS} slots full against 1 running, 1 s steps)`,
    result: `${medianSpread(
      rounds.map((r) => r.perTaskKb),
      1,
    )} kB per task (medians: ${mid((r) => r.worker.one)} MB with 1 running, ${mid((r) => r.worker.full)} MB with ${mid((r) => r.worker.running)}; ${mid((r) => r.started.worker)} MB when started)`,
    samples: `the same rounds, read after ${durationS * 4 + 3} s of running`,
  });
}
