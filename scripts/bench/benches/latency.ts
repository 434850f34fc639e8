// Latencies of the task lifecycle: start → worker picks it up, cancel → stopped,
// revocation → all the principal's tasks stopped, worker SIGKILL → resumed elsewhere.
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { revokePrincipal } from '@mtg/tasks';
import type { BenchContext } from '../lib/context.ts';
import { rpc, startTask } from '../lib/mcp.ts';
import { fmt, median, percentile, sleep } from '../lib/stats.ts';
import { NO_CAPS } from './throughput.ts';
import { pollUntil, pollUntilOrLast } from '../../lib/poll-until.ts';

const LONG = (tag: string, i: number) => ({
  collection: `long-${tag}`,
  count: 100_000,
  patch: { i, tag },
});

/** pollUntil, checking every 20 ms by default (latencies are measured against it). */
const waitFor = <T>(fn: () => Promise<T>, ok: (v: T) => boolean, timeoutMs: number, everyMs = 20) =>
  pollUntil(fn, ok, timeoutMs, everyMs);
/** The same, for a measurement that reports what did not finish in time instead of failing. */
const lastAfter = async <T>(
  fn: () => Promise<T>,
  ok: (v: T) => boolean,
  timeoutMs: number,
  everyMs = 20,
) => (await pollUntilOrLast(fn, ok, timeoutMs, everyMs)).value;

export async function benchPickup(ctx: BenchContext): Promise<void> {
  await ctx.topology({
    gateways: 1,
    workers: 2,
    gatewayEnv: NO_CAPS,
    workerEnv: { DEMO_STEP_MS: '200' },
  });
  await ctx.reset();
  const n = ctx.options.samples;
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const u = ctx.users[i % ctx.users.length]!;
    ids.push(
      await startTask(ctx.stack.mcpUrl, u.token, 'bulk_update_records', {
        collection: 'pickup',
        count: 500,
        patch: { i },
      }),
    );
    await sleep(100 + Math.random() * 100);
  }
  await waitFor(
    () =>
      ctx.sql<{ n: number }>(
        `SELECT count(*)::int AS n FROM audit.events WHERE type = 'task.started' AND task_id = ANY($1)`,
        [ids],
      ),
    (r) => r[0]!.n === ids.length,
    10_000,
    100,
  );
  // Where the time goes: inside the creating transaction (created_at is its start, the
  // task.created event its last statement), then commit → notify → fetch → claim, then the
  // claim's own audit append.
  const rows = await ctx.sql<{
    audit_ms: number;
    column_ms: number;
    in_tx_ms: number;
    to_claim_ms: number;
    claim_audit_ms: number;
  }>(
    `SELECT extract(epoch FROM e.occurred_at - t.created_at) * 1000 AS audit_ms,
            extract(epoch FROM t.started_at - t.created_at) * 1000 AS column_ms,
            extract(epoch FROM c.occurred_at - t.created_at) * 1000 AS in_tx_ms,
            extract(epoch FROM t.started_at - c.occurred_at) * 1000 AS to_claim_ms,
            extract(epoch FROM e.occurred_at - t.started_at) * 1000 AS claim_audit_ms
       FROM app.tasks t JOIN audit.events e ON e.task_id = t.id AND e.type = 'task.started'
       JOIN audit.events c ON c.task_id = t.id AND c.type = 'task.created'
      WHERE t.id = ANY($1)`,
    [ids],
  );
  const lat = rows.map((r) => Number(r.audit_ms));
  ctx.log(
    `pickup: p50 ${fmt(median(lat), 1)} ms, p99 ${fmt(percentile(lat, 99), 1)} ms over ${lat.length}`,
  );

  // Baseline: pg-boss' own polling pickup (work() at its fastest interval, 0.5 s).
  const boss = new PgBoss({ connectionString: ctx.db.url, schedule: false, supervise: false });
  boss.on('error', () => {});
  await boss.start();
  const queue = `bench-pickup-${Date.now()}`;
  await boss.createQueue(queue);
  const base: number[] = [];
  let resolveAll!: () => void;
  const all = new Promise<void>((r) => (resolveAll = r));
  // A batch per poll, so every job waiting is taken at the next poll (with batchSize 1 the
  // backlog of 100–200 ms arrivals would grow at 2 jobs/s and measure queueing instead).
  await boss.work<{ t: number }>(
    queue,
    { pollingIntervalSeconds: 0.5, batchSize: 50 },
    async (jobs) => {
      for (const job of jobs) base.push(Date.now() - job.data.t);
      if (base.length >= n) resolveAll();
    },
  );
  for (let i = 0; i < n; i++) {
    await boss.send(queue, { t: Date.now() });
    await sleep(100 + Math.random() * 100);
  }
  await Promise.race([all, sleep(5000)]);
  await boss.stop({ graceful: false, close: true });
  await ctx.reset();
  const p50 = median(lat);
  ctx.rows.push({
    section: 'Latency',
    goalId: 'pickup',
    measure: 'Start → worker step start (task `created_at` → `task.started` event)',
    result: `p50 ${fmt(p50, 1)} ms, p99 ${fmt(percentile(lat, 99), 1)} ms`,
    baseline: `pg-boss polling pickup (0.5 s interval): p50 ${fmt(median(base), 0)} ms, p99 ${fmt(percentile(base, 99), 0)} ms`,
    goal: 'goal p50 ≤ 20 ms',
    met: p50 <= 20,
    samples: `${lat.length} starts 100–200 ms apart, 2 idle workers`,
    note:
      `p50 split: ${fmt(median(rows.map((r) => Number(r.in_tx_ms))), 1)} ms inside the creating transaction up to its task.created event, ` +
      `${fmt(median(rows.map((r) => Number(r.to_claim_ms))), 1)} ms from there (commit, NOTIFY, fetch) to the worker's claim, ` +
      `${fmt(median(rows.map((r) => Number(r.claim_audit_ms))), 1)} ms from the claim to its task.started event`,
  });
}

export async function benchCancel(ctx: BenchContext): Promise<void> {
  await ctx.topology({
    gateways: 1,
    workers: 2,
    gatewayEnv: NO_CAPS,
    workerEnv: { DEMO_STEP_MS: '200' },
  });
  await ctx.reset();
  const durations: number[] = [];
  const settledBy: Record<string, number> = {};
  for (let i = 0; i < ctx.options.samples; i++) {
    const u = ctx.users[i % ctx.users.length]!;
    const taskId = await startTask(
      ctx.stack.mcpUrl,
      u.token,
      'bulk_update_records',
      LONG('cancel', i),
    );
    // Running: leased, and somewhere inside a step.
    await waitFor(
      () => ctx.sql(`SELECT 1 FROM app.tasks WHERE id = $1 AND lease_owner IS NOT NULL`, [taskId]),
      (r) => r.length === 1,
      5000,
    );
    await sleep(50 + Math.random() * 200);
    const r = await rpc(ctx.stack.mcpUrl, u.token, 'tasks/cancel', { taskId });
    durations.push(r.ms);
    const [ev] = await ctx.sql<{ by: string }>(
      `SELECT body::jsonb -> 'data' ->> 'settledBy' AS by FROM audit.events WHERE task_id = $1 AND type = 'task.cancelled'`,
      [taskId],
    );
    const key = ev?.by ?? `not settled (HTTP ${r.status})`;
    settledBy[key] = (settledBy[key] ?? 0) + 1;
  }
  ctx.log(
    `cancel: p50 ${fmt(median(durations))} ms, p99 ${fmt(percentile(durations, 99))} ms; ${JSON.stringify(settledBy)}`,
  );
  await ctx.reset();
  const p99 = percentile(durations, 99);
  ctx.rows.push({
    section: 'Latency',
    measure:
      'Cancel → worker stopped (`tasks/cancel` call on a running task; it returns once the stop is acknowledged)',
    result: `p50 ${fmt(median(durations))} ms, p99 ${fmt(p99)} ms`,
    goal: 'goal p99 ≤ 250 ms',
    met: p99 <= 250,
    samples: `${durations.length} cancels mid-step (200 ms steps); settled by: ${Object.entries(
      settledBy,
    )
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  });
}

/** The revocation paths the running gateway offers (it answers something other than 404). */
async function revocationPaths(ctx: BenchContext): Promise<Array<'admin' | 'ssf'>> {
  const probe = async (path: string) =>
    (
      await fetch(`${ctx.stack.gatewayUrls[0]}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      })
    ).status;
  const paths: Array<'admin' | 'ssf'> = [];
  if ((await probe('/admin/principals/revoke')) !== 404) paths.push('admin');
  if ((await probe('/ssf/events')) !== 404) paths.push('ssf');
  return paths;
}

const PATH_NAMES = {
  admin: 'gateway admin API `POST /admin/principals/revoke`',
  ssf: 'dev IdP `POST /admin/users/disable` (what `npm run idp:user disable` calls) → SSF push to the gateway',
  direct: 'revokePrincipal() called directly (the gateway offers no revocation endpoint yet)',
};

export async function benchRevocation(ctx: BenchContext): Promise<void> {
  await ctx.topology({
    gateways: 1,
    workers: 2,
    gatewayEnv: NO_CAPS,
    workerEnv: { DEMO_STEP_MS: '200' },
  });
  await ctx.reset();
  const found = await revocationPaths(ctx);
  const paths: Array<keyof typeof PATH_NAMES> = found.length ? found : ['direct'];
  const tenant = 'bench-revoke';
  const adminToken = await ctx.stack.token('bench-admin', tenant, {
    scope: 'tasks:admin records:write',
  });
  const pool = new pg.Pool({
    connectionString: ctx.db.url,
    options: '-c role=mtg_gateway',
    max: 3,
  });
  const perTask = 6;
  // Work after the revocation, over all runs and paths: steps begun after it (the step
  // journal's started_at) and downstream writes that landed after it (downstream.writes).
  const after = { tasks: 0, steps: 0, writes: 0, maxWritesPerTask: 0, stepsBefore: 0, missing: 0 };
  for (const path of paths) {
    const times: number[] = [];
    const problems: string[] = [];
    for (let r = 0; r < ctx.options.runs; r++) {
      const sub = `revoked-${path}-${r}-${Date.now()}`;
      const token = await ctx.stack.token(sub, tenant);
      const ids: string[] = [];
      for (let i = 0; i < perTask; i++)
        ids.push(await startTask(ctx.stack.mcpUrl, token, 'bulk_update_records', LONG(sub, i)));
      await waitFor(
        () =>
          ctx.sql<{ n: number }>(
            `SELECT count(*)::int AS n FROM app.tasks WHERE id = ANY($1) AND lease_owner IS NOT NULL`,
            [ids],
          ),
        (x) => x[0]!.n === perTask,
        5000,
      );
      // Mid-run: every task has journaled a step and is somewhere inside its next one.
      await waitFor(
        () =>
          ctx.sql<{ n: number }>(
            `SELECT count(DISTINCT task_id)::int AS n FROM app.task_steps WHERE task_id = ANY($1)`,
            [ids],
          ),
        (x) => x[0]!.n === perTask,
        10_000,
      );
      await sleep(Math.random() * 150);
      const t0 = performance.now();
      let answer = '';
      if (path === 'direct') {
        await revokePrincipal(pool, { tenant, subject: sub }, { path: 'bench' });
      } else {
        const response =
          path === 'admin'
            ? await fetch(`${ctx.stack.gatewayUrls[0]}/admin/principals/revoke`, {
                method: 'POST',
                headers: {
                  authorization: `Bearer ${adminToken}`,
                  'content-type': 'application/json',
                },
                body: JSON.stringify({ subject: sub, reason: 'bench' }),
              })
            : await fetch(`${ctx.stack.idpUrl}/admin/users/disable`, {
                method: 'POST',
                headers: {
                  authorization: `Bearer ${ctx.stack.secrets.idpAdminToken}`,
                  'content-type': 'application/json',
                },
                body: JSON.stringify({ sub, tenant }),
              });
        answer = `HTTP ${response.status} ${(await response.text()).slice(0, 200)}`;
        if (!response.ok) problems.push(answer);
      }
      const done = await lastAfter(
        () =>
          ctx.sql<{ n: number }>(
            `SELECT count(*)::int AS n FROM app.tasks WHERE id = ANY($1) AND status IN ('completed', 'failed', 'cancelled')`,
            [ids],
          ),
        (x) => x[0]!.n === perTask,
        10_000,
        5,
      );
      const ms = performance.now() - t0;
      const [work] = await ctx.sql<{
        at: Date | null;
        steps: number;
        before: number;
        writes: number;
        max_writes: number;
      }>(
        `WITH r AS (SELECT min(occurred_at) AS at FROM audit.events
                     WHERE type = 'principal.revoked' AND tenant = $2 AND subject = $3),
              w AS (SELECT task_id, count(*) AS n FROM downstream.writes, r
                     WHERE task_id = ANY($1::text[]) AND downstream.writes.at > r.at GROUP BY task_id)
         SELECT (SELECT at FROM r) AS at,
                (SELECT count(*) FROM app.task_steps, r WHERE task_id = ANY($1) AND started_at > r.at)::int AS steps,
                (SELECT count(*) FROM app.task_steps, r WHERE task_id = ANY($1) AND started_at <= r.at)::int AS before,
                (SELECT coalesce(sum(n), 0) FROM w)::int AS writes,
                (SELECT coalesce(max(n), 0) FROM w)::int AS max_writes`,
        [ids, tenant, sub],
      );
      if (!work!.at) problems.push(`no principal.revoked event for ${sub}`);
      after.tasks += ids.length;
      after.missing += work!.at ? 0 : 1;
      after.steps += work!.steps;
      after.stepsBefore += work!.before;
      after.writes += work!.writes;
      after.maxWritesPerTask = Math.max(after.maxWritesPerTask, work!.max_writes);
      if (done[0]!.n !== perTask)
        problems.push(`only ${done[0]!.n}/${perTask} stopped after 10 s (${answer})`);
      times.push(ms);
      ctx.log(
        `revocation run ${r + 1} (${path}): ${fmt(ms)} ms for ${perTask} tasks${done[0]!.n !== perTask ? ` — only ${done[0]!.n} stopped; ${answer}` : ''}`,
      );
    }
    ctx.rows.push({
      section: 'Latency',
      measure: `Revocation → all of the principal's running tasks stopped, via ${PATH_NAMES[path]}`,
      result: `median ${fmt(median(times))} ms, max ${fmt(Math.max(...times))} ms`,
      goal: 'goal ≤ 1 s',
      met: problems.length === 0 && Math.max(...times) <= 1000,
      samples: `${times.length} revocations of a user with ${perTask} running tasks${problems.length ? `; problems: ${problems.join('; ')}` : ''}`,
    });
  }
  ctx.rows.push({
    section: 'Latency',
    goalId: 'revocation-boundary',
    measure:
      'Revocation stops work within one boundary: steps begun, and downstream writes landed, after the `principal.revoked` event, for tasks revoked mid-run',
    result: `${after.steps} steps begun after the revocation, ${after.writes} downstream writes landed after it (at most ${after.maxWritesPerTask} for one task); ${after.stepsBefore} steps journaled before it`,
    goal: 'goal: no step begun after the revocation; at most the one write in flight per task',
    met: after.missing === 0 && after.tasks > 0 && after.steps === 0 && after.maxWritesPerTask <= 1,
    samples: `the ${after.tasks} tasks of the revocation rows above, each revoked after its first step was journaled (200 ms steps)${after.missing ? `; ${after.missing} revocations left no principal.revoked event` : ''}; step start from the journal (app.task_steps.started_at), writes from the downstream's own table`,
  });
  await pool.end();
  await ctx.reset();
}

export async function benchFailover(ctx: BenchContext): Promise<void> {
  await ctx.topology({
    gateways: 1,
    workers: 3,
    gatewayEnv: NO_CAPS,
    workerEnv: { DEMO_STEP_MS: '200' },
  });
  await ctx.reset();
  const delays: number[] = [];
  const perRun: number[] = [];
  for (let r = 0; r < ctx.options.runs; r++) {
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const u = ctx.users[(r * 6 + i) % ctx.users.length]!;
      ids.push(
        await startTask(ctx.stack.mcpUrl, u.token, 'bulk_update_records', LONG(`kill${r}`, i)),
      );
    }
    const leases = await waitFor(
      () =>
        ctx.sql<{ id: string; lease_owner: string | null }>(
          `SELECT id, lease_owner FROM app.tasks WHERE id = ANY($1)`,
          [ids],
        ),
      (x) => x.every((t) => t.lease_owner),
      5000,
    );
    await sleep(300);
    const owner = leases.find((t) => t.lease_owner)!.lease_owner!;
    const victims = leases.filter((t) => t.lease_owner === owner).map((t) => t.id);
    const proc = ctx.stack.workers.get(owner)!;
    const [{ t: killedAt }] = (await ctx.sql<{ t: Date }>('SELECT clock_timestamp() AS t')) as [
      { t: Date },
    ];
    proc.kill('SIGKILL');
    await proc.exited;
    const taken = await lastAfter(
      () =>
        ctx.sql<{ task_id: string; ms: number }>(
          `SELECT task_id, extract(epoch FROM min(occurred_at) - $2::timestamptz) * 1000 AS ms FROM audit.events
          WHERE type = 'task.lease_taken' AND task_id = ANY($1) AND occurred_at > $2 GROUP BY task_id`,
          [victims, killedAt],
        ),
      (x) => x.length === victims.length,
      30_000,
      50,
    );
    const ms = taken.map((t) => Number(t.ms));
    delays.push(...ms);
    perRun.push(Math.max(...ms));
    ctx.log(
      `failover run ${r + 1}: ${victims.length} tasks of ${owner} resumed after ${ms.map((m) => fmt(m)).join(', ')} ms${taken.length < victims.length ? ` (${victims.length - taken.length} not resumed in 30 s)` : ''}`,
    );
    await ctx.stack.startWorker(owner, { DEMO_STEP_MS: '200' });
    await ctx.reset();
  }
  const worst = Math.max(...perRun);
  ctx.rows.push({
    section: 'Latency',
    measure: 'Worker SIGKILL → task resumed elsewhere (kill → next `task.lease_taken` event)',
    result: `median ${fmt(median(delays))} ms, max ${fmt(worst)} ms`,
    goal: 'goal ≤ 10 s',
    met: worst <= 10_000,
    samples: `${ctx.options.runs} kills, ${delays.length} tasks resumed; WORKER_LEASE_MS 4000 (default), maintenance tick 1 s`,
  });
}
