// The hand-built peer, measured in the same run as the goals it is the baseline of: the
// official MCP SDK v1 with DBOS Transact on PostgreSQL (scripts/bench/peer-server.ts), serving
// the headline's tool as 2025-11-25 tasks, driven by the same load generator with the same
// tokens. It writes no audit trail, exchanges no token and calls no downstream system; the
// product does all three, so its figures stand beside the peer's, not against a constant.
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { BenchContext, Row } from '../lib/context.ts';
import { cpuMeter, postgresBackends } from '../lib/cpu.ts';
import { runLoadProcess } from '../lib/load-client.ts';
import { freePort, spawnProc, type Proc } from '../lib/process-stack.ts';
import { fmt, median, medianSpread, sleep } from '../lib/stats.ts';
import {
  POLL_CONNECTIONS,
  RAMP_S,
  START_CONNECTIONS,
  STEP_MS,
  STEPS,
  sustainedRate,
} from './headline-shape.ts';
import { NO_CAPS } from './throughput.ts';

const RECORDS = 500 * STEPS; // the headline's tool: a step per 500 records

interface Peer {
  proc: Proc;
  url: string;
  database: string;
  /** The bench's own session on the peer's database (left out of the CPU meters). */
  watch: pg.Client;
  watchPid: number;
  stop(): Promise<void>;
}

async function startPeer(ctx: BenchContext): Promise<Peer> {
  const database = `${ctx.db.name}_peer`;
  const adminUrl = new URL(ctx.db.url);
  const admin = new pg.Client({ connectionString: adminUrl.href });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
  await admin.query(`CREATE DATABASE "${database}"`);
  const drop = async () => {
    await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
    await admin.end();
  };
  const peerUrl = new URL(adminUrl.href);
  peerUrl.pathname = `/${database}`;
  const port = await freePort();
  const proc = spawnProc(
    'peer',
    'gateway',
    fileURLToPath(new URL('../peer-server.ts', import.meta.url)),
    {
      ...process.env,
      PORT: String(port),
      DATABASE_URL: peerUrl.href,
      ISSUER: ctx.stack.idpUrl,
      AUDIENCE: ctx.stack.mcpUrl,
      STEP_MS: String(STEP_MS),
    },
    `${ctx.stack.dataDir}/logs/peer.log`,
  );
  const watch = new pg.Client({ connectionString: peerUrl.href });
  try {
    await proc.ready;
    await watch.connect();
  } catch (error) {
    await proc.stop();
    await drop();
    throw error;
  }
  const watchPid = (await watch.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!
    .pid;
  return {
    proc,
    url: `http://127.0.0.1:${port}/mcp`,
    database,
    watch,
    watchPid,
    async stop() {
      await watch.end();
      await proc.stop();
      await drop();
    },
  };
}

const groups = (peer: Peer) => ({
  peer: () => (peer.proc.running() ? [peer.proc.pid] : []),
  postgres: () => postgresBackends(peer.database).filter((pid) => pid !== peer.watchPid),
});

/** The peer's tasks (its DBOS workflows) created since `sinceMs`, with their owners. */
async function workflowsSince(peer: Peer, sinceMs: number) {
  const r = await peer.watch.query<{ id: string; status: string; owner: string | null }>(
    `SELECT workflow_uuid AS id, status, authenticated_user AS owner
       FROM dbos.workflow_status WHERE created_at >= $1`,
    [sinceMs],
  );
  return r.rows;
}

async function waitAllEnded(peer: Peer, sinceMs: number, timeoutMs = 120_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const rows = await workflowsSince(peer, sinceMs);
    const open = rows.filter((w) => w.status === 'PENDING' || w.status === 'ENQUEUED').length;
    if (open === 0) return rows;
    if (Date.now() > deadline)
      throw new Error(`peer: ${open} tasks still open after ${timeoutMs} ms`);
    await sleep(100);
  }
}

const dbNowMs = async (peer: Peer) =>
  Number(
    (
      await peer.watch.query<{ ms: string }>(
        `SELECT (extract(epoch FROM now()) * 1000)::bigint AS ms`,
      )
    ).rows[0]!.ms,
  );

/** (token, task) pairs of ended workflows, each read with its owner's token. */
function pairsOf(ctx: BenchContext, rows: Array<{ id: string; owner: string | null }>) {
  const tokenOf = new Map(ctx.users.map((u) => [`${u.tenant}/${u.sub}`, u.token]));
  return rows.map((w) => {
    const token = w.owner ? tokenOf.get(w.owner) : undefined;
    if (!token) throw new Error(`peer: task ${w.id} has no known owner (${w.owner})`);
    return { token, taskId: w.id };
  });
}

const startScenario = (ctx: BenchContext, tag: string) => ({
  kind: 'start' as const,
  tokens: ctx.users.map((u) => u.token),
  runTag: tag,
  count: RECORDS,
  wire: '2025' as const,
});

/** CPU of one task, start → result: a batch started, run to its end and each result read. */
async function costBatch(ctx: BenchContext, peer: Peer, n: number) {
  const since = await dbNowMs(peer);
  const meter = cpuMeter(groups(peer));
  const started = await runLoadProcess({
    urls: [peer.url],
    connections: START_CONNECTIONS,
    durationS: 60,
    amount: n,
    scenario: startScenario(ctx, `peer-cost-${Date.now()}`),
  });
  const ended = await waitAllEnded(peer, since);
  const read = await runLoadProcess({
    urls: [peer.url],
    connections: Math.min(START_CONNECTIONS, ended.length),
    durationS: 60,
    amount: ended.length,
    scenario: { kind: 'result-2025', pairs: pairsOf(ctx, ended) },
  });
  const cpu = meter.stop();
  const completed = ended.filter((w) => w.status === 'SUCCESS').length;
  const failed =
    started.non2xx +
    started.errors +
    started.rpcErrors +
    read.non2xx +
    read.errors +
    read.rpcErrors;
  return {
    perTask: ((cpu.ms.peer ?? 0) + (cpu.ms.postgres ?? 0)) / Math.max(1, completed),
    peer: (cpu.ms.peer ?? 0) / Math.max(1, completed),
    postgres: (cpu.ms.postgres ?? 0) / Math.max(1, completed),
    problems: failed + (ended.length - completed) + (ended.length === n ? 0 : 1),
    completed,
  };
}

/** The headline's load against the peer: 20 connections starting, 50 polling. */
async function headlineRun(
  ctx: BenchContext,
  peer: Peer,
  pairs: Array<{ token: string; taskId: string }>,
  seconds: number,
  measure: boolean,
) {
  const running = Promise.all([
    runLoadProcess({
      urls: [peer.url],
      connections: START_CONNECTIONS,
      durationS: seconds + (measure ? 2 * RAMP_S : 0),
      scenario: startScenario(ctx, `peer-h-${Date.now()}`),
    }),
    runLoadProcess({
      urls: [peer.url],
      connections: POLL_CONNECTIONS,
      durationS: seconds + (measure ? 2 * RAMP_S : 0),
      scenario: { kind: 'poll-2025', pairs },
    }),
  ]);
  if (!measure) {
    await running;
    return undefined;
  }
  await sleep(RAMP_S * 1000);
  const from = await dbNowMs(peer);
  const meter = cpuMeter(groups(peer));
  await sleep(seconds * 1000);
  const cpu = meter.stop();
  const to = await dbNowMs(peer);
  const [starts, polls] = await running;
  const r = await peer.watch.query<{
    created: number;
    completed: number;
    open_from: number;
    open_to: number;
  }>(
    `SELECT count(*) FILTER (WHERE created_at > $1 AND created_at <= $2)::int AS created,
            count(*) FILTER (WHERE status = 'SUCCESS' AND updated_at > $1 AND updated_at <= $2)::int AS completed,
            count(*) FILTER (WHERE created_at <= $1 AND (status IN ('PENDING', 'ENQUEUED') OR updated_at > $1))::int AS open_from,
            count(*) FILTER (WHERE created_at <= $2 AND (status IN ('PENDING', 'ENQUEUED') OR updated_at > $2))::int AS open_to
       FROM dbos.workflow_status`,
    [from, to],
  );
  const w = r.rows[0]!;
  const windowS = (to - from) / 1000;
  return {
    starts: w.created / windowS,
    completions: w.completed / windowS,
    polls: polls.perSecond,
    growth: w.open_to - w.open_from,
    cpu: ((cpu.ms.peer ?? 0) + (cpu.ms.postgres ?? 0)) / Math.max(1, w.completed),
    failed: starts.non2xx + starts.errors + starts.rpcErrors + polls.non2xx + polls.errors,
  };
}

type CostBatch = Awaited<ReturnType<typeof costBatch>>;
type HeadlineLoad = NonNullable<Awaited<ReturnType<typeof headlineRun>>>;

/**
 * The peer's batches and headline runs taken between the product's (benchCost, benchTasks):
 * on this shared machine the speed moves within a run, by a third within minutes at times
 * (docs/benchmark-history.md, run (22)), so a peer measured after the product may stand
 * beside figures of another machine. benchPeer reports what was taken here and measures on
 * its own only what was not (a run without the product's benches).
 */
const beside = { costs: [] as CostBatch[], loads: [] as HeadlineLoad[] };

export interface PeerBeside {
  /** One measured cost batch (the first call runs an unmeasured one before it). */
  cost(): Promise<void>;
  /** One measured headline run (the first call readies its poll targets and warms up). */
  headline(): Promise<void>;
  stop(): Promise<void>;
}

/** The peer, started beside the product's stack, if this run measures it; else undefined. */
export async function peerBeside(ctx: BenchContext): Promise<PeerBeside | undefined> {
  if (ctx.options.only && !ctx.options.only.has('peer')) return undefined;
  const peer = await startPeer(ctx);
  let warm = false;
  let targets: { since: number; pairs: Array<{ token: string; taskId: string }> } | undefined;
  return {
    async cost() {
      // The meters count the server's shared background processes (the WAL writer): what
      // they still do for the product's batch is not the peer's.
      await sleep(SETTLE_MS);
      const n = costBatchSize(ctx);
      if (!warm) await costBatch(ctx, peer, n);
      warm = true;
      const c = await costBatch(ctx, peer, n);
      logCost(ctx, c, beside.costs.length + 1);
      beside.costs.push(c);
    },
    async headline() {
      await sleep(SETTLE_MS);
      targets ??= await headlineTargets(ctx, peer);
      const h = (await headlineRun(ctx, peer, targets.pairs, ctx.options.durationS, true))!;
      logLoad(ctx, h, beside.loads.length + 1);
      beside.loads.push(h);
      await waitAllEnded(peer, targets.since);
    },
    stop: () => peer.stop(),
  };
}

/** A pause before each of the peer's measurements (beside the product's, after its batch). */
const SETTLE_MS = 500;

const costBatchSize = (ctx: BenchContext) => Math.max(60, ctx.options.samples * 10);

function logCost(ctx: BenchContext, c: CostBatch, nth: number) {
  ctx.log(
    `peer cost batch ${nth}: ${fmt(c.perTask, 1)} ms per task (peer ${fmt(c.peer, 1)}, postgres ${fmt(c.postgres, 1)}), ${c.completed} completed, ${c.problems} problems`,
  );
}

function logLoad(ctx: BenchContext, h: HeadlineLoad, nth: number) {
  ctx.log(
    `peer headline run ${nth}: ${fmt(h.starts)} starts/s, ${fmt(h.completions)} completed/s, ${fmt(h.polls)} polls/s; open tasks changed by ${h.growth}; ${fmt(h.cpu, 1)} ms CPU per completed task; ${h.failed} failed requests`,
  );
}

/** What the pollers read: 64 of the peer's tasks (ended: they take 200 ms); then a warm-up. */
async function headlineTargets(ctx: BenchContext, peer: Peer) {
  const since = await dbNowMs(peer);
  await runLoadProcess({
    urls: [peer.url],
    connections: 8,
    durationS: 60,
    amount: 64,
    scenario: startScenario(ctx, `peer-targets-${Date.now()}`),
  });
  const pairs = pairsOf(ctx, await waitAllEnded(peer, since));
  await headlineRun(ctx, peer, pairs, Math.min(3, ctx.options.durationS), false);
  return { since, pairs };
}

export async function benchPeer(ctx: BenchContext): Promise<void> {
  // Taken beside the product's (peerBeside) when its benches ran; else measured here.
  const own = { costs: beside.costs.length === 0, loads: beside.loads.length === 0 };
  if (own.costs || own.loads) {
    // The IdP signs the tokens; the gateway only names their audience and does nothing here.
    await ctx.topology({ gateways: 1, workers: 0, gatewayEnv: NO_CAPS });
    await ctx.reset();
    const peer = (await peerBeside(ctx))!;
    try {
      if (own.costs) for (let r = 0; r < ctx.options.runs; r++) await peer.cost();
      if (own.loads) for (let r = 0; r < ctx.options.runs; r++) await peer.headline();
    } finally {
      await peer.stop();
    }
  }
  report(ctx, beside.costs, beside.loads, costBatchSize(ctx), own);
}

function report(
  ctx: BenchContext,
  costs: CostBatch[],
  loads: HeadlineLoad[],
  n: number,
  own: { costs: boolean; loads: boolean },
) {
  const { durationS } = ctx.options;
  const when = (alone: boolean, beside: string) =>
    alone ? 'on its own: this run did not measure the product beside it' : beside;
  const costText = `${medianSpread(
    costs.map((c) => c.perTask),
    1,
  )} ms`;
  const { keptUp, rate: sustained } = sustainedRate(
    median(loads.map((l) => l.starts)),
    median(loads.map((l) => l.completions)),
    median(loads.map((l) => l.growth)),
  );
  const costProblems = costs.reduce((s, c) => s + c.problems, 0);
  const loadFailures = loads.reduce((s, l) => s + l.failed, 0);
  const mid = [...loads].sort((a, b) => a.completions - b.completions)[
    Math.floor(loads.length / 2)
  ]!;
  const startsText = `${fmt(sustained)}/s sustained (${medianSpread(loads.map((l) => l.starts))} starts/s, ${medianSpread(loads.map((l) => l.completions))} completions/s, ${keptUp ? 'completions kept up' : 'the backlog grew'}; ${medianSpread(loads.map((l) => l.polls))} polls/s meanwhile; CPU ms per completed task during the load, polls included: ${fmt(mid.cpu, 1)})`;
  ctx.rows.push(
    {
      section: 'Tasks',
      measure: `The hand-built peer (the MCP SDK v1 with DBOS Transact on PostgreSQL, scripts/bench/peer-server.ts; no audit trail, no token exchange, no downstream system): CPU ms per completed task, start → result, the same ${STEPS}-step tool with ${STEP_MS} ms steps on the 2025-11-25 wire, summed over its process and its database's PostgreSQL`,
      result: costText,
      samples: `median of ${costs.length} batches of ${n} tasks (started by ${START_CONNECTIONS} connections, run, each result read with \`tasks/result\`), after an unmeasured one; ${when(own.costs, "each taken in the cost bench after a pair of the product's 2-step batches (one per wire), so that it ran on the same minutes of the machine")}${costProblems ? `; ${costProblems} failed requests or tasks` : ''}`,
    },
    {
      section: 'Tasks',
      measure: `The hand-built peer under the headline's load: ${START_CONNECTIONS} connections starting the tool (task-augmented \`tools/call\`, 2025-11-25 wire), ${POLL_CONNECTIONS} polling \`tasks/get\` of 64 of its ended tasks`,
      result: startsText,
      samples: `median of ${loads.length} × ${durationS} s (a window ${RAMP_S} s into a load ${2 * RAMP_S} s longer); ${when(own.loads, "each taken in the headline bench right after one of the product's runs (one after each run on each wire), so that it ran on the same minutes of the machine")}${loadFailures ? `; ${loadFailures} failed requests` : ''}`,
    },
  );
  // The goals' rows of this run, if their benches ran: the peer is their baseline.
  // The Goals table shows a row's goal, not its baseline: the peer's figure goes beside both.
  const baseline = (goalId: string, text: string, short: string) => {
    const row: Row | undefined = ctx.rows.find((r) => r.goalId === goalId);
    if (!row) return;
    row.baseline = text;
    row.goal = `${row.goal ?? ''} (the hand-built peer in this run: ${short})`;
  };
  baseline(
    'cpu-per-task',
    `the hand-built peer in this run: ${costText} (no audit, no token exchange, no downstream; its row below)`,
    costText,
  );
  const peerStarts = `the hand-built peer in this run, same load on the 2025-11-25 wire: ${fmt(sustained)} starts/s (its row below)`;
  baseline('headline', peerStarts, `${fmt(sustained)}/s`);
  baseline('headline-2025', peerStarts, `${fmt(sustained)}/s`);
  ctx.log(`peer: ${costText} per task; ${fmt(sustained)} starts/s sustained`);
}
