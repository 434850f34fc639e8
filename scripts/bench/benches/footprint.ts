// Memory per connection and per task: the gateway's resident set idle and under 1,000
// concurrent polling connections, and one worker's idle and with every slot running a long
// task; the differences divided by connections and by tasks.
import type { BenchContext } from '../lib/context.ts';
import { runLoadProcess } from '../lib/load-client.ts';
import { startTask } from '../lib/mcp.ts';
import { residentMemory } from '../lib/process-stack.ts';
import { fmt, sleep } from '../lib/stats.ts';
import { NO_CAPS } from './throughput.ts';

const CONNECTIONS = 1000;
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

export async function benchFootprint(ctx: BenchContext): Promise<void> {
  const durationS = Math.max(ctx.options.durationS, 10);
  await ctx.topology({
    gateways: 1,
    workers: 1,
    gatewayEnv: NO_CAPS,
    workerEnv: { DEMO_STEP_MS: '1000', WORKER_CONCURRENCY: String(SLOTS) },
  });
  await ctx.reset();
  const gateway = ctx.stack.gateways[0]!;
  const worker = [...ctx.stack.workers.values()][0]!;
  await sleep(2000);
  const idle = {
    gateway: residentMemory(gateway.pid)!.rssMb,
    worker: residentMemory(worker.pid)!.rssMb,
  };

  // Every slot busy (and as many tasks again queued behind them), long steps.
  const pairs: Array<{ token: string; taskId: string }> = [];
  for (let i = 0; i < SLOTS * 2; i++) {
    const u = ctx.users[i % ctx.users.length]!;
    const taskId = await startTask(ctx.stack.mcpUrl, u.token, 'bulk_update_records', {
      collection: 'footprint',
      count: 100_000,
      patch: { i },
    });
    pairs.push({ token: u.token, taskId });
  }
  await sleep(3000);
  const [{ n: running } = { n: 0 }] = await ctx.sql<{ n: number }>(
    `SELECT count(*)::int AS n FROM app.tasks WHERE status = 'working' AND lease_owner IS NOT NULL`,
  );
  // A warm-up round first (V8 grows its heap to a load once), then the measured one.
  const poll = () =>
    runLoadProcess({
      urls: [ctx.stack.mcpUrl],
      connections: CONNECTIONS,
      durationS,
      scenario: { kind: 'poll', pairs },
    });
  await poll();
  let load: Awaited<ReturnType<typeof poll>> | undefined;
  const gatewayPeak = await peakDuring(
    gateway.pid,
    poll().then((l) => (load = l)),
  );
  const workerFull = residentMemory(worker.pid)!.rssMb;
  await ctx.reset();
  const failed = load ? load.non2xx + load.errors + load.timeouts : 0;
  ctx.rows.push({
    section: 'Memory',
    measure: `Gateway resident memory per polling connection (${fmt(CONNECTIONS)} concurrent connections polling \`tasks/get\`)`,
    result: `${fmt(((gatewayPeak - idle.gateway) * 1024) / CONNECTIONS, 1)} kB per connection (idle ${fmt(idle.gateway)} MB, peak ${fmt(gatewayPeak)} MB)`,
    samples: `the second of 2 × ${durationS} s rounds, ${fmt(load?.perSecond ?? 0)} polls/s, p99 ${fmt(load?.p99 ?? 0)} ms${failed ? `, ${failed} failed` : ''}`,
    note: 'VmRSS sampled every 250 ms',
  });
  ctx.rows.push({
    section: 'Memory',
    measure: `Worker resident memory per running task (one worker, ${SLOTS} slots full, 1 s steps)`,
    result: `${fmt(((workerFull - idle.worker) * 1024) / Math.max(1, running), 1)} kB per task (idle ${fmt(idle.worker)} MB, ${running} running: ${fmt(workerFull)} MB)`,
    samples: `after ${durationS * 2 + 3} s of running`,
  });
}
