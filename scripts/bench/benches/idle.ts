import type { BenchContext } from '../lib/context.ts';
import { cpuMeter, stackBackends, type PidSource } from '../lib/cpu.ts';
import { runLoadProcess } from '../lib/load-client.ts';
import { byName, describeSessionTotals, sessionMeter } from '../lib/session-split.ts';
import { fmt, median, sleep } from '../lib/stats.ts';
import { dbNow, runCounts, tasksSince, waitEnded } from '../lib/task-batches.ts';
import { STEPS, WORKERS_ENV } from './headline-shape.ts';
import { NO_CAPS, stackGroups } from './throughput.ts';

const WINDOW_MS = 10_000;
/** The light load: starts/s of the headline tool, which one worker's slots carry with room. */
const LIGHT_RATE = 10;
/** The warm-up batch before it, closed-loop: the scaling batches' size. */
const WARM_TASKS = 300;

/**
 * What waiting workers cost the database, and themselves: an idle stack with 1 and then with 8
 * idle workers, 10 s each, in rounds (BENCH_RUNS, at least 2); each round's difference over
 * the 7 added workers is one sample, for the database's backends and for the worker processes
 * (their own CPU, every thread). A window opens `BENCH_IDLE_SETTLE_MS` (10 s) after the workers
 * reported ready: a worker's start-up is not idle (its first leader wait takes the session
 * its start used, and its first announcement after that opens another, about 25 ms of backend
 * CPU once). The log splits each window's CPU by session (application_name) and says how much
 * went to sessions opened during the window. After each idle window, a light load on the same
 * workers, warmed up first: LIGHT_RATE starts/s of the headline tool for 10 s, run to its end.
 * The worker processes' CPU per completed task with 1 and with 8 workers says what the workers
 * that wait cost while the others run tasks (each woken per task, or not).
 */
export async function benchIdleWorkers(ctx: BenchContext): Promise<void> {
  const settleMs = Number(process.env.BENCH_IDLE_SETTLE_MS ?? 10_000);
  const rounds = Math.max(2, ctx.options.runs);
  const ownSessions: PidSource = () => stackBackends(ctx, { background: false });
  const samples: Array<{ one: number; eight: number; extra: number }> = [];
  const processSamples: Array<{ one: number; eight: number; extra: number }> = [];
  const lightSamples: Array<{ one: number; eight: number; extra: number }> = [];
  for (let round = 0; round < rounds; round++) {
    const seen: Record<number, number> = {};
    const seenProcesses: Record<number, number> = {};
    const seenLight: Record<number, number> = {};
    for (const workers of [1, 8]) {
      await ctx.topology({ gateways: 1, workers, gatewayEnv: NO_CAPS, workerEnv: WORKERS_ENV });
      await sleep(settleMs);
      const bySession = await sessionMeter(ctx, byName);
      const { postgres, workers: processes } = stackGroups(ctx);
      const meter = cpuMeter(
        { postgres: postgres!, backends: ownSessions, workers: processes! },
        { precise: true },
      );
      await sleep(WINDOW_MS);
      const cpu = meter.stop();
      seen[workers] = cpu.ms.backends ?? 0;
      seenProcesses[workers] = cpu.ms.workers ?? 0;
      ctx.log(
        `idle round ${round + 1}, ${workers} workers: PostgreSQL ${fmt(cpu.ms.postgres ?? 0, 1)} ms in 10 s (the bench database's backends ${fmt(seen[workers], 1)} ms); the worker processes ${fmt(seenProcesses[workers], 1)} ms; by session: ${describeSessionTotals(await bySession.stop())}`,
      );
      const light = await lightLoad(
        ctx,
        processes!,
        `idle-light-${round}-${workers}-${Date.now()}`,
      );
      seenLight[workers] = light.perTask;
      ctx.log(
        `light load round ${round + 1}, ${workers} workers: ${light.completed} tasks completed (${light.open} not ended); the worker processes ${fmt(light.perTask, 2)} ms per task`,
      );
    }
    samples.push(perExtraWorker(seen));
    processSamples.push(perExtraWorker(seenProcesses));
    lightSamples.push(perExtraWorker(seenLight));
  }
  const { extra, extras, mid } = summary(samples);
  ctx.rows.push({
    section: 'Scaling',
    goalId: 'idle-workers',
    measure: 'PostgreSQL CPU of an idle stack over 10 s: 1 idle worker vs 8 idle workers',
    result: `${fmt(extra, 1)} (${fmt(Math.min(...extras), 1)}–${fmt(Math.max(...extras), 1)}) ms per extra idle worker (the median round: ${fmt(mid.one)} ms with 1 worker vs ${fmt(mid.eight)} ms with 8, in the bench database's backends)`,
    goal: 'goal ≤ 10 ms per idle worker per 10 s (1/1000 of a core)',
    met: extra <= 10,
    samples: `median (min–max) of ${rounds} rounds of 1 then 8 workers, 10 s each, ${fmt(settleMs / 1000, 1)} s after the workers were ready`,
    note: "an idle worker announces itself every 5 s and waits for the maintenance leader lock in PostgreSQL, one round trip every 30 s (no snapshot held); only the leader runs maintenance and pg-boss supervision. Backend CPU from the scheduler's count (/proc/<pid>/schedstat)",
  });
  const processes = summary(processSamples);
  ctx.rows.push({
    section: 'Scaling',
    measure: "The worker processes' own CPU in the same windows: 1 idle worker vs 8 idle workers",
    result: `${fmt(processes.extra, 1)} (${fmt(Math.min(...processes.extras), 1)}–${fmt(Math.max(...processes.extras), 1)}) ms per extra idle worker (the median round: ${fmt(processes.mid.one)} ms with 1 worker vs ${fmt(processes.mid.eight)} ms with 8)`,
    samples: `median (min–max) of ${rounds} rounds, the windows of the row above`,
    note: "every thread of each worker process, from the scheduler's count (/proc/<pid>/task/<tid>/schedstat): its timers (the announcement every 5 s, the maintenance tick every second, the leader wait), the metrics' event-loop sampling every 100 ms, and what the runtime does between them",
  });
  const light = summary(lightSamples);
  ctx.rows.push({
    section: 'Scaling',
    measure: `The worker processes' CPU per task at a light load (${LIGHT_RATE} starts/s of the headline tool): 1 worker vs 8 workers`,
    result: `${fmt(light.mid.one, 2)} ms per task with 1 worker vs ${fmt(light.mid.eight, 2)} ms with 8 (the median round); ${fmt(light.extra, 2)} (${fmt(Math.min(...light.extras), 2)}–${fmt(Math.max(...light.extras), 2)}) ms per task per extra worker`,
    samples: `median (min–max) of ${rounds} rounds; each a 10 s load after the idle window of the row above, on the same workers after an unmeasured warm-up batch of ${WARM_TASKS} tasks, run to its end`,
    note: 'every thread of each worker process (scheduler count), start of the load to the end of its last task: the runs themselves, and whatever a created task costs the workers that do not run it',
  });
  await ctx.topology({ gateways: 1, workers: 0, gatewayEnv: NO_CAPS });
}

/**
 * LIGHT_RATE starts/s for 10 s, run to the end: the worker processes' CPU per completed task.
 * After an unmeasured warm-up batch, run to its end: without it, each worker ran its share of
 * the load with code not yet optimised, and 8 workers' shares cost more than one's for that
 * alone (per extra worker 3.3 ms a task cold).
 */
async function lightLoad(ctx: BenchContext, workers: PidSource, tag: string) {
  const load = async (label: string, o: { rate?: number; amount?: number }) => {
    const since = await dbNow(ctx);
    await runLoadProcess({
      urls: [ctx.stack.mcpUrl],
      connections: 20,
      durationS: o.rate ? WINDOW_MS / 1000 : 60,
      ...o,
      scenario: {
        kind: 'start' as const,
        tokens: ctx.users.map((u) => u.token),
        runTag: `${tag}-${label}`,
        count: 500 * STEPS,
      },
    });
    const ids = (await tasksSince(ctx, since)).map((t) => t.id);
    return { ids, open: await waitEnded(ctx, ids, 60_000) };
  };
  await ctx.reset();
  await load('warm', { amount: WARM_TASKS });
  await ctx.reset();
  const meter = cpuMeter({ workers }, { precise: true });
  const { ids, open } = await load('measured', { rate: LIGHT_RATE });
  const cpu = meter.stop();
  const { completed } = await runCounts(ctx, ids);
  return { perTask: (cpu.ms.workers ?? 0) / Math.max(1, completed), completed, open };
}

/** One round's cost of each of the 7 workers added to the first. */
function perExtraWorker(seen: Record<number, number>) {
  return { one: seen[1]!, eight: seen[8]!, extra: (seen[8]! - seen[1]!) / 7 };
}

/** The median extra worker's cost over the rounds, and the round nearest to it. */
function summary(samples: Array<{ one: number; eight: number; extra: number }>) {
  const extras = samples.map((s) => s.extra);
  const extra = median(extras);
  const mid = samples.reduce((a, b) =>
    Math.abs(b.extra - extra) < Math.abs(a.extra - extra) ? b : a,
  );
  return { extra, extras, mid };
}
