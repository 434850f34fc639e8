// `npm run bench`: measures the product against baselines taken in the same run, prints the
// results and writes BENCHMARKS.md. Runs everything as real processes on loopback against a
// throw-away database on TEST_ADMIN_DATABASE_URL (default: the machine's PostgreSQL).
//
// Environment: BENCH_RUNS (3), BENCH_DURATION_S (8), BENCH_CONNECTIONS (50),
// BENCH_SAMPLES (30, latency samples; task batches are 10× that), BENCH_ONLY (comma list of:
// tasks, cost, overhead, peer, curve, starts, polls, memory, footprint, pickup, cancel,
// revocation, failover, scaling, idle, audit, upstream, backlog, volume; `overhead` under load
// needs `tasks` in the same run; `peer`, the hand-built peer that is the baseline of the `tasks`
// and `cost` goals, is measured between their runs and batches when they run, else on its
// own), BENCH_BACKLOG_TASKS (100000), BENCH_VOLUME_TASKS (1000000),
// BENCH_VOLUME_EVENTS_PER_TASK (10), BENCH_CHROMIUM (/usr/bin/chromium, for the curve's chart),
// BENCH_LOG_LEVEL (info), BENCH_OUT (BENCHMARKS.md; "-" to only print), BENCH_CAVEAT (a line
// for the report's header, e.g. that the machine was shared).
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { benchAudit } from './benches/audit.ts';
import { benchUpstream } from './benches/upstream.ts';
import { benchVolume } from './benches/volume.ts';
import { benchCurve } from './benches/curve.ts';
import { benchBacklog } from './benches/backlog.ts';
import { benchFootprint } from './benches/footprint.ts';
import { benchCancel, benchFailover, benchPickup, benchRevocation } from './benches/latency.ts';
import { benchMemory, benchPolls, benchStarts, NO_CAPS } from './benches/throughput.ts';
import { benchCost, benchOverhead, benchTasks, benchWorkerScaling } from './benches/tasks.ts';
import { benchIdleWorkers } from './benches/idle.ts';
import { benchPeer } from './benches/peer.ts';
import {
  createContext,
  type BenchContext,
  type BenchOptions,
  type UserToken,
} from './lib/context.ts';
import { preparedDatabase, MACHINE_POSTGRES } from './lib/database.ts';
import { machineInfo } from './lib/machine.ts';
import { machineSpeed } from './lib/machine-speed.ts';
import { REPO_ROOT, startProcessStack } from './lib/process-stack.ts';
import { renderReport } from './lib/report.ts';

const BENCHES: Array<[string, (ctx: BenchContext) => Promise<void>]> = [
  ['tasks', benchTasks],
  ['cost', benchCost],
  ['overhead', benchOverhead],
  ['peer', benchPeer],
  ['curve', benchCurve],
  ['starts', benchStarts],
  ['polls', benchPolls],
  ['memory', benchMemory],
  ['footprint', benchFootprint],
  ['pickup', benchPickup],
  ['cancel', benchCancel],
  ['revocation', benchRevocation],
  ['failover', benchFailover],
  ['scaling', benchWorkerScaling],
  ['idle', benchIdleWorkers],
  ['audit', benchAudit],
  ['upstream', benchUpstream],
  ['backlog', benchBacklog],
  // Last: it leaves the database holding the seeded history.
  ['volume', benchVolume],
];

function positive(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0)
    throw new Error(`${name} must be a positive number, not ${raw}`);
  return n;
}

async function main(): Promise<void> {
  const only = process.env.BENCH_ONLY
    ? new Set(process.env.BENCH_ONLY.split(',').map((s) => s.trim()))
    : undefined;
  for (const name of only ?? []) {
    if (!BENCHES.some(([n]) => n === name))
      throw new Error(
        `BENCH_ONLY: unknown bench ${name}; known: ${BENCHES.map(([n]) => n).join(', ')}`,
      );
  }
  const options: BenchOptions = {
    runs: Math.round(positive('BENCH_RUNS', 3)),
    durationS: positive('BENCH_DURATION_S', 8),
    connections: Math.round(positive('BENCH_CONNECTIONS', 50)),
    samples: Math.round(positive('BENCH_SAMPLES', 30)),
    logLevel: process.env.BENCH_LOG_LEVEL ?? 'info',
    ...(only ? { only } : {}),
  };
  process.env.TEST_ADMIN_DATABASE_URL ??= MACHINE_POSTGRES;
  const started = Date.now();
  const machine = await machineInfo(process.env.TEST_ADMIN_DATABASE_URL);
  const speedAtStart = await machineSpeed();
  process.stderr.write(
    `machine: ${JSON.stringify(machine)}\nspeed: ${JSON.stringify(speedAtStart)}\noptions: ${JSON.stringify({ ...options, only: only ? [...only] : 'all' })}\n`,
  );

  const db = await preparedDatabase();
  const stack = await startProcessStack({
    databaseUrl: db.url,
    databaseUrls: db.logins,
    gateways: 1,
    gatewaySlots: 2,
    workers: 0,
    env: { LOG_LEVEL: options.logLevel },
    gatewayEnv: NO_CAPS,
  });
  let ctx: BenchContext | undefined;
  try {
    const users: UserToken[] = [];
    for (let t = 0; t < 8; t++) {
      for (let u = 0; u < 4; u++) {
        const sub = `bench-user-${t}-${u}`;
        const tenant = `bench-tenant-${t}`;
        users.push({ sub, tenant, token: await stack.token(sub, tenant) });
      }
    }
    ctx = createContext(options, db, stack, users);
    for (const [name, bench] of BENCHES) {
      if (only && !only.has(name)) continue;
      const t0 = Date.now();
      // Fresh tokens for each bench: a whole run outlasts a token's hour (a run of every bench
      // once reached the volume bench with expired ones, and failed there).
      for (const user of users) user.token = await stack.token(user.sub, user.tenant);
      ctx.log(`--- ${name}`);
      try {
        await bench(ctx);
      } catch (error) {
        ctx.log(`${name} failed: ${error instanceof Error ? error.stack : String(error)}`);
        ctx.rows.push({
          section: 'Failures',
          measure: name,
          result: `bench failed: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`,
          samples: '-',
        });
      }
      ctx.log(`${name} took ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    }
    const speedAtEnd = await machineSpeed();
    ctx.log(`speed at the end: ${JSON.stringify(speedAtEnd)}`);
    const report = renderReport({
      machine,
      speed: [speedAtStart, speedAtEnd],
      options,
      rows: ctx.rows,
      blocks: ctx.blocks,
      notes: ctx.notes,
      ...(process.env.BENCH_CAVEAT ? { caveat: process.env.BENCH_CAVEAT } : {}),
      totalS: (Date.now() - started) / 1000,
    });
    process.stdout.write(report + '\n');
    const out = process.env.BENCH_OUT ?? path.join(REPO_ROOT, 'BENCHMARKS.md');
    if (out !== '-') {
      writeFileSync(out, report + '\n');
      process.stderr.write(`written: ${out}\n`);
    }
  } finally {
    await ctx?.close().catch(() => {});
    await stack.stop().catch(() => {});
    await db.drop().catch(() => {});
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`bench: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
