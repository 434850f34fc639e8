// Latency as a curve: the headline tool (2 steps of 100 ms, 2 workers) started at 20, 40,
// 60, 80 and 100 % of the rate this stack sustains, offered open-loop; at each level the
// start → completed overhead over the tool's own 200 ms (p50, p99) and start → first step
// (task created → its run starts on a worker). Drawn as a PNG next to BENCHMARKS.md.
import { mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BenchContext } from '../lib/context.ts';
import { writeLineChartPng } from '../lib/chart-png.ts';
import { runLoadProcess } from '../lib/load-client.ts';
import { fmt, median, medianSpread as spread, percentile } from '../lib/stats.ts';
import { dbNow, waitEnded } from '../lib/task-batches.ts';
import { REPO_ROOT } from '../lib/process-stack.ts';
import { NO_CAPS } from './throughput.ts';
import { overheads } from './tasks.ts';

const STEP_MS = 100;
const STEPS = 2;
const LEVELS = [0.2, 0.4, 0.6, 0.8, 1.0];
/** In flight at most: enough that the offered rate, not the connections, sets the pace. */
const CONNECTIONS = 100;
/**
 * The maximum counts completions from this far into its window on: before it, the window's
 * first tasks are still in their steps and nothing can have completed.
 */
const SETTLE_S = 1;

export const CURVE_IMAGE = 'docs/benchmarks/latency-curve.png';

interface Point {
  offered: number;
  achieved: number;
  p50: number;
  p99: number;
  firstStepP50: number;
  firstStepP99: number;
  /** The p50 split of the overhead: created → claimed, inside the steps, the rest. */
  pickup: number;
  /** created → claimed, split: the start's statement, commit → fetch, fetch → claim. */
  pickupParts: { start: number; toFetch: number; toClaim: number };
  inSteps: number;
  rest: number;
  failed: number;
}

const scenario = (ctx: BenchContext, tag: string) => ({
  kind: 'start' as const,
  tokens: ctx.users.map((u) => u.token),
  runTag: tag,
  count: 500 * STEPS,
});

/** Starts for `seconds` (at `rate`/s, or closed-loop), then every task of the window ended. */
async function window(ctx: BenchContext, tag: string, seconds: number, rate?: number) {
  const from = await dbNow(ctx);
  const load = await runLoadProcess({
    urls: [ctx.stack.mcpUrl],
    connections: rate ? CONNECTIONS : 20,
    durationS: seconds,
    ...(rate ? { rate } : {}),
    scenario: scenario(ctx, tag),
  });
  const to = await dbNow(ctx);
  const settled = new Date(from.getTime() + SETTLE_S * 1000);
  const ids = (
    await ctx.sql<{ id: string }>(
      `SELECT id FROM app.tasks WHERE created_at > $1 AND created_at <= $2`,
      [from, to],
    )
  ).map((r) => r.id);
  const left = await waitEnded(ctx, ids, 180_000);
  const rows = await ctx.sql<{ total_ms: number; first_ms: number; done: boolean }>(
    `SELECT extract(epoch FROM ended_at - created_at) * 1000 AS total_ms,
            extract(epoch FROM started_at - created_at) * 1000 AS first_ms,
            status = 'completed' AS done
       FROM app.tasks WHERE id = ANY($1)`,
    [ids],
  );
  const done = rows.filter((r) => r.done);
  const seconds_ = (to.getTime() - from.getTime()) / 1000;
  const [c] = await ctx.sql<{ n: number }>(
    `SELECT count(*)::int AS n FROM app.tasks
      WHERE id = ANY($1) AND status = 'completed' AND ended_at > $2 AND ended_at <= $3`,
    [ids, settled, to],
  );
  const overhead = done.map((r) => Number(r.total_ms) - STEP_MS * STEPS);
  const first = done.map((r) => Number(r.first_ms));
  const split = await overheads(ctx, ids);
  return {
    pickup: split.pickup,
    pickupParts: split.pickupParts,
    inSteps: split.inSteps,
    rest: split.rest,
    achieved: done.length / seconds_,
    completing: c!.n / (seconds_ - SETTLE_S),
    p50: percentile(overhead, 50),
    p99: percentile(overhead, 99),
    firstStepP50: percentile(first, 50),
    firstStepP99: percentile(first, 99),
    failed: rows.length - done.length + left + load.non2xx + load.errors + load.rpcErrors,
  };
}

export async function benchCurve(ctx: BenchContext): Promise<void> {
  const { runs, durationS } = ctx.options;
  await ctx.topology({
    gateways: 1,
    workers: 2,
    gatewayEnv: NO_CAPS,
    workerEnv: { DEMO_STEP_MS: String(STEP_MS) },
  });
  await ctx.reset();
  await window(ctx, `curve-warm-${Date.now()}`, Math.min(3, durationS));
  // The maximum: the rate at which the stack completes tasks while 20 closed-loop connections
  // start them as fast as they are answered. Not the rate they start them at: a start costs a
  // fraction of a run, so those connections start tasks faster than the workers complete them,
  // and a rate offered at that pace only grows a backlog.
  const max: number[] = [];
  const startedAtMax: number[] = [];
  for (let r = 0; r < runs; r++) {
    await ctx.reset();
    const w = await window(ctx, `curve-max-${r}-${Date.now()}`, durationS);
    max.push(w.completing);
    startedAtMax.push(w.achieved);
    ctx.log(
      `curve: maximum run ${r + 1}: ${fmt(w.completing, 1)} completed/s while ${fmt(w.achieved, 1)}/s were started`,
    );
  }
  const maxRate = median(max);
  const byLevel: Point[][] = LEVELS.map(() => []);
  for (let r = 0; r < runs; r++) {
    for (const [i, level] of LEVELS.entries()) {
      await ctx.reset();
      const offered = level * maxRate;
      const w = await window(ctx, `curve-${level}-${r}-${Date.now()}`, durationS, offered);
      byLevel[i]!.push({ offered, ...w });
      ctx.log(
        `curve: ${level * 100} % (${fmt(offered, 1)}/s offered) run ${r + 1}: ${fmt(w.achieved, 1)}/s, overhead p50 ${fmt(w.p50, 1)} p99 ${fmt(w.p99, 1)} ms, first step p50 ${fmt(w.firstStepP50, 1)} ms, ${w.failed} failed`,
      );
    }
  }
  await ctx.reset();
  for (const [i, level] of LEVELS.entries()) {
    const pts = byLevel[i]!;
    const part = (f: (p: Point) => number) => fmt(median(pts.map(f)), 1);
    const p50 = median(pts.map((p) => p.p50));
    const p99 = median(pts.map((p) => p.p99));
    const goal = level <= 0.8;
    const failed = pts.reduce((n, p) => n + p.failed, 0);
    ctx.rows.push({
      section: 'Latency curve',
      ...(goal ? { goalId: `curve-${level}` } : {}),
      measure: `Starts offered at ${level * 100} % of the maximum (${fmt(level * maxRate, 1)}/s): start → completed overhead over the 2 × ${STEP_MS} ms steps`,
      result: `p50 ${spread(
        pts.map((p) => p.p50),
        1,
      )} ms, p99 ${spread(
        pts.map((p) => p.p99),
        1,
      )} ms; start → first step p50 ${spread(
        pts.map((p) => p.firstStepP50),
        1,
      )} ms, p99 ${spread(
        pts.map((p) => p.firstStepP99),
        1,
      )} ms; ${spread(
        pts.map((p) => p.achieved),
        1,
      )} completed/s`,
      baseline: `maximum: ${spread(max, 1)} completed/s (completions per second from ${SETTLE_S} s into a window of 20 closed-loop connections starting tasks, which started ${spread(startedAtMax, 1)}/s)`,
      ...(goal ? { goal: 'goal p50 ≤ 50 ms and p99 ≤ 250 ms', met: p50 <= 50 && p99 <= 250 } : {}),
      samples: `median (min–max) of ${runs} × ${durationS} s, open loop, up to ${CONNECTIONS} in flight${failed ? `, ${failed} failed` : ''}`,
      note: `p50 split (medians of the runs): ${fmt(median(pts.map((p) => p.pickup)), 1)} ms created → claimed (${part((p) => p.pickupParts.start)} ms the start's own statement, ${part((p) => p.pickupParts.toFetch)} ms its commit → NOTIFY → the worker's fetch, ${part((p) => p.pickupParts.toClaim)} ms that fetch → the claim), ${fmt(median(pts.map((p) => p.inSteps)), 1)} ms inside the steps beyond their ${STEP_MS} ms sleeps (exchange, downstream call), ${fmt(median(pts.map((p) => p.rest)), 1)} ms between steps and after the last (journal, settle)`,
    });
  }
  const points = (f: (p: Point) => number) =>
    LEVELS.map((level, i) => ({ x: level * 100, y: median(byLevel[i]!.map(f)) }));
  // Beside the report it goes in (BENCH_OUT), or a temporary directory when it only prints.
  const out = process.env.BENCH_OUT ?? 'BENCHMARKS.md';
  const file =
    out === '-'
      ? path.join(os.tmpdir(), 'latency-curve.png')
      : path.join(path.dirname(path.resolve(REPO_ROOT, out)), CURVE_IMAGE);
  mkdirSync(path.dirname(file), { recursive: true });
  const drawn = await writeLineChartPng(
    {
      title: `Start → completed overhead by offered load (maximum ${fmt(maxRate, 1)} completed/s, 2 workers, 2 × ${STEP_MS} ms steps)`,
      xLabel: 'offered starts, % of the maximum',
      yLabel: 'ms',
      series: [
        { label: 'overhead p50', points: points((p) => p.p50) },
        { label: 'overhead p99', points: points((p) => p.p99) },
        { label: 'start → first step p50', points: points((p) => p.firstStepP50) },
        {
          label: 'goal p50 (50 ms)',
          points: [
            { x: 20, y: 50 },
            { x: 100, y: 50 },
          ],
          dashed: true,
        },
        {
          label: 'goal p99 (250 ms)',
          points: [
            { x: 20, y: 250 },
            { x: 100, y: 250 },
          ],
          dashed: true,
        },
      ],
    },
    file,
  );
  ctx.blocks.push({
    section: 'Latency curve',
    lines: drawn
      ? out === '-'
        ? [`(Chart written to ${file}.)`, '']
        : [`![Start → completed overhead by offered load](${CURVE_IMAGE})`, '']
      : ['(No chart: no Chromium to draw it with; set BENCH_CHROMIUM.)', ''],
  });
}
