// Chaos (f): the database fails over to another server. A Patroni cluster (etcd, two
// PostgreSQL 15 nodes, synchronous_mode) behind HAProxy; the stack reaches the database only
// through HAProxy's address, as it would a managed database's endpoint. While tasks are
// started, polled and run on all three wires and audit events are appended, the leader node
// is killed (Patroni and its postmaster, SIGKILL) and, separately, switched over with
// patronictl, several times each. Nobody restarts a gateway or a worker. Checked: every start
// the client was told succeeded exists once and completes once, no step or downstream write
// doubled, no audit event lost or doubled, every checkpoint signed before a failover still
// verifies and the next one signs, no answer but 503 while there is no leader; RTO measured.
// Runs with `npm run test:failover` (CI), or `npm run chaos`; skipped when Patroni, etcd or
// HAProxy is not installed (.ci/install-ha.sh).
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { prepareExisting } from '../../scripts/bench/lib/database.ts';
import { startProcessStack, type ProcessStack } from '../../scripts/bench/lib/process-stack.ts';
import { startPatroniCluster, type PatroniCluster } from '../support/patroni-cluster.ts';
import { auditCli as cli } from './support/audit-cli.ts';
import { haDescribe } from './support/ha-gate.ts';
import { sql } from '../support/sql.ts';
import { sleep, waitFor } from './support/clients.ts';
import { startFailoverLoad } from './support/failover-load.ts';
import { batchesOf, chainProblems, checkIntegrity, expectIntact } from './support/integrity.ts';

const FAILOVERS = Number(process.env.HA_FAILOVERS ?? 5);
const describeHa = await haDescribe('database-failover');

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)]! : NaN;
};

describeHa('database failover (Patroni, etcd, HAProxy)', () => {
  let cluster: PatroniCluster;
  let stack: ProcessStack;
  let cliDir: string;

  beforeAll(async () => {
    cluster = await startPatroniCluster({ synchronous: true });
    await cluster.healthy();
    const databaseUrls = await prepareExisting(cluster.url);
    cliDir = mkdtempSync(path.join(os.tmpdir(), 'mtg-ha-cli-'));
    stack = await startProcessStack({
      databaseUrl: cluster.url,
      databaseUrls,
      workers: 2,
      env: { DEMO_STEP_MS: '100' },
      gatewayEnv: { MAX_ACTIVE_TASKS_PER_USER: '10000', MAX_ACTIVE_TASKS_PER_TENANT: '10000' },
      keepLogs: process.env.CHAOS_KEEP_LOGS === '1',
      // Exits are recorded: the test requires none (recovery without restarting a process).
      superviseWorkers: true,
    });
  }, 240_000);
  afterAll(async () => {
    await stack?.stop();
    await cluster?.stop();
    if (cliDir) rmSync(cliDir, { recursive: true, force: true });
  }, 120_000);

  test(`${FAILOVERS} node kills and ${FAILOVERS} switchovers at load: nothing acknowledged lost, nothing doubled, 503 only, recovery by itself`, async () => {
    const token = await stack.token('ha-user', 'ha');
    const load = startFailoverLoad({
      mcpUrl: stack.mcpUrl,
      token,
      databaseUrl: cluster.url,
      count: 1000, // two batches: two downstream writes and two journal rows a task
    });
    const rounds: Array<{
      kind: 'kill' | 'switchover';
      at: number;
      newLeaderMs: number;
      rtoMs: number;
      workersMs: number;
      checkpointSigned: boolean;
    }> = [];
    const workerIds = [...stack.workers.keys()];
    try {
      await sleep(3000);
      for (let i = 0; i < FAILOVERS * 2; i++) {
        const kind = i % 2 === 0 ? 'kill' : 'switchover';
        // A checkpoint signed just before the failover: it must still verify afterwards.
        // Signed as production should with replication: only what a standby has (with
        // synchronous replication that is every commit already, so it costs no wait).
        const signed = await cli(['audit', 'checkpoint'], cluster.url, cliDir, {
          AUDIT_CHECKPOINT_STANDBYS: '1',
        });
        let at: number;
        let killed: PatroniCluster['nodes'][number] | undefined;
        if (kind === 'kill') ({ at, killed } = await cluster.killLeader());
        else ({ at } = await cluster.switchover());
        await cluster.leader(60_000);
        const leaderAt = Date.now();
        const newLeaderMs = leaderAt - at;
        // The stack takes starts again (the RTO itself is computed from the record at the end).
        await waitFor(
          async () => load.starts.find((s) => s.id && s.at > leaderAt),
          (s) => s !== undefined,
          90_000,
          100,
          'a successful start after the failover',
        );
        // Every worker consuming again: a journal row of each written on the new leader.
        const atIso = new Date(leaderAt);
        const consumed = await waitFor(
          () =>
            sql<{ worker: string; first: Date }>(
              cluster.url,
              `SELECT worker, min(completed_at) AS first FROM app.task_steps WHERE completed_at > $1 GROUP BY worker`,
              [atIso],
            ).catch(() => []),
          (r) => workerIds.every((w) => r.some((x) => x.worker === w)),
          90_000,
          250,
          'every worker journaling a step after the failover',
        );
        const workersMs = Math.max(...consumed.map((c) => c.first.getTime() - at));
        if (killed) await cluster.restartNode(killed);
        await cluster.healthy(120_000);
        rounds.push({
          kind,
          at,
          newLeaderMs,
          rtoMs: NaN,
          workersMs,
          checkpointSigned: signed.code === 0,
        });
        process.stderr.write(`failover ${i + 1} (${kind}): ${JSON.stringify(rounds.at(-1))}\n`);
        await sleep(1500);
      }
    } finally {
      await load.stop();
    }

    // RTO per failover, from the record: from the fault to the first start accepted after the
    // last start refused during the outage (refused before the new leader was seen, or within
    // 5 s after: the router and the pools catching up); 0 when none was refused. Refusals
    // later in the round are printed, not counted.
    rounds.forEach((r, i) => {
      const until = rounds[i + 1]?.at ?? Infinity;
      const leaderAt = r.at + r.newLeaderMs;
      const refused = load.starts.filter((s) => !s.id && s.at >= r.at && s.at < until);
      const outage = refused.filter((s) => s.at <= leaderAt + 5000);
      const last = Math.max(...outage.map((s) => s.at));
      const ok = load.starts.find((s) => s.id && s.at > last);
      r.rtoMs = outage.length === 0 || !ok ? 0 : ok.at + ok.ms - r.at;
      const late = refused.filter((s) => s.at > leaderAt + 5000);
      if (late.length)
        process.stderr.write(
          `failover ${i + 1}: ${late.length} start(s) refused later in the round: ${JSON.stringify(late.map((s) => ({ afterMs: s.at - r.at, wire: s.wire, error: s.error?.slice(0, 160) })))}\n`,
        );
    });
    process.stderr.write(
      `failover RTOs: ${JSON.stringify(rounds.map((r) => [r.kind, r.rtoMs]))}\n`,
    );

    // Everything acknowledged finishes.
    const acknowledged = load.starts.filter((s) => s.id).map((s) => s.id!);
    const expected = new Map(acknowledged.map((id) => [id, batchesOf(1000)]));
    await waitFor(
      () =>
        sql<{ open: number }>(
          cluster.url,
          `SELECT count(*)::int AS open FROM app.tasks WHERE id = ANY($1) AND status NOT IN ('completed', 'failed', 'cancelled')`,
          [acknowledged],
        ),
      (r) => r[0]?.open === 0,
      180_000,
      500,
      'every acknowledged task ending',
    );

    const byStatus: Record<string, number> = {};
    for (const s of load.starts.filter((x) => !x.id))
      byStatus[s.status ?? 0] = (byStatus[s.status ?? 0] ?? 0) + 1;
    const samples: Record<string, string[]> = {};
    for (const s of load.starts.filter((x) => !x.id)) {
      const k = `${s.wire}:${s.status ?? 0}`;
      samples[k] ??= [];
      if (samples[k].length < 2) samples[k].push(s.error ?? '');
    }
    process.stderr.write(`chaos (f): failed starts, samples: ${JSON.stringify(samples)}\n`);
    const pollStatus: Record<string, number> = {};
    for (const p of load.polls) pollStatus[p.status] = (pollStatus[p.status] ?? 0) + 1;
    const kills = rounds.filter((r) => r.kind === 'kill');
    const switches = rounds.filter((r) => r.kind === 'switchover');
    const fig = (rs: typeof rounds, k: 'rtoMs' | 'workersMs' | 'newLeaderMs') =>
      `median ${median(rs.map((r) => r[k]))} ms, max ${Math.max(...rs.map((r) => r[k]))} ms`;
    process.stderr.write(
      `chaos (f): ${acknowledged.length} starts acknowledged of ${load.starts.length}; failed starts by status ${JSON.stringify(byStatus)}; polls by status ${JSON.stringify(pollStatus)}; ` +
        `${load.appended.length} audit appends acknowledged, ${load.appendFailures.length} failed; ` +
        `kill: new leader ${fig(kills, 'newLeaderMs')}, RTO ${fig(kills, 'rtoMs')}, every worker ${fig(kills, 'workersMs')}; ` +
        `switchover: new leader ${fig(switches, 'newLeaderMs')}, RTO ${fig(switches, 'rtoMs')}, every worker ${fig(switches, 'workersMs')}; ` +
        `worker exits: ${stack.crashes.length}; gateway ${stack.gateways[0]!.running() ? 'up throughout' : 'DIED'}\n`,
    );

    // No process was restarted: the gateway kept running, no worker exited.
    expect(stack.gateways.every((g) => g.running())).toBe(true);
    expect(stack.crashes.map((c) => `${c.worker}: ${c.logTail.slice(-300)}`)).toEqual([]);
    // While there is no leader the gateway says 503, never 500 (0 = connection refused/reset
    // from the client's side does not happen either: the gateway stays up).
    expect(load.starts.filter((s) => !s.id && !s.unavailable).map((s) => s.error)).toEqual([]);
    expect(load.starts.filter((s) => s.status && s.status >= 500 && s.status !== 503)).toEqual([]);
    expect(load.polls.filter((p) => p.internal || p.status === 0)).toEqual([]);
    // Every start acknowledged exists once, completes once, with no step or write doubled.
    const integrity = await checkIntegrity(cluster.url, expected);
    expectIntact('chaos (f)', integrity);
    // Audit: every acknowledged append is there exactly once; nothing unacknowledged doubled.
    const audit = await sql<{ cid: string; n: number }>(
      cluster.url,
      `SELECT body::jsonb ->> 'correlationId' AS cid, count(*)::int AS n FROM audit.events
        WHERE body::jsonb ->> 'correlationId' LIKE $1 GROUP BY 1`,
      [`${load.tag}-%`],
    );
    const counts = new Map(audit.map((a) => [a.cid, a.n]));
    expect(load.appended.filter((c) => counts.get(c) !== 1)).toEqual([]);
    expect(audit.filter((a) => a.n !== 1)).toEqual([]);
    expect(await chainProblems(cluster.url)).toEqual([]);
    // Every checkpoint signed before a failover verifies, and the next one signs.
    expect(rounds.filter((r) => !r.checkpointSigned)).toEqual([]);
    const verify = await cli(['audit', 'verify', '--json'], cluster.url, cliDir);
    expect({ code: verify.code, out: verify.code ? verify.out.slice(0, 1500) : '' }).toEqual({
      code: 0,
      out: '',
    });
    const next = await cli(['audit', 'checkpoint'], cluster.url, cliDir);
    expect({ code: next.code, out: next.code ? next.out.slice(0, 1500) : '' }).toEqual({
      code: 0,
      out: '',
    });
    expect(rounds.length).toBe(FAILOVERS * 2);
  }, 900_000);
});
