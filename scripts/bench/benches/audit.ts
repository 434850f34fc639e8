// The audit chain: appends/s under concurrent writers (group commit, next to one event per
// commit), and verification speed.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchContext } from '../lib/context.ts';
import { runJsonScript } from '../lib/child-json.ts';
import { cpuMeter } from '../lib/cpu.ts';
import { REPO_ROOT } from '../lib/process-stack.ts';
import { fmt, median, medianSpread } from '../lib/stats.ts';

const APPEND = fileURLToPath(new URL('../audit-append.ts', import.meta.url));

interface VerifyReport {
  ok: boolean;
  events: number;
  eventsPerSecond: number;
  elapsedMs: number;
}

/** `npm run -s audit:verify -- --json` against the bench database; wall time included. */
export function auditVerify(
  databaseUrl: string,
): Promise<{ code: number; report?: VerifyReport; wallMs: number; output: string }> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'mtg-verify-'));
  const started = performance.now();
  return new Promise((resolve) => {
    execFile(
      'npm',
      ['run', '-s', 'audit:verify', '--', '--json'],
      {
        cwd: REPO_ROOT,
        env: { ...process.env, DATABASE_URL: databaseUrl, DATA_DIR: dataDir },
        maxBuffer: 16 * 1024 * 1024,
        timeout: 300_000,
      },
      (error, stdout, stderr) => {
        rmSync(dataDir, { recursive: true, force: true });
        const wallMs = performance.now() - started;
        let report: VerifyReport | undefined;
        try {
          report = JSON.parse(stdout) as VerifyReport;
        } catch {
          // not JSON: the output says why
        }
        resolve({
          code: error ? Number((error as { code?: number }).code ?? 1) : 0,
          ...(report ? { report } : {}),
          wallMs,
          output: `${stdout}${stderr}`.slice(0, 2000),
        });
      },
    );
  });
}

export function auditVerifyAvailable(): boolean {
  return existsSync(path.join(REPO_ROOT, 'scripts', 'audit-verify.ts'));
}

interface AppendRun {
  perSecond: number;
  appended: number;
  p50: number;
  p99: number;
}

/** `processes` writer processes at once, `writers` each; their rates summed. */
async function appendRun(
  url: string,
  processes: number,
  writers: number,
  durationS: number,
  mode: string,
  tenants?: number,
) {
  const runs = await Promise.all(
    Array.from({ length: processes }, () =>
      runJsonScript<AppendRun>(APPEND, [
        url,
        String(writers),
        String(durationS),
        mode,
        ...(tenants ? [String(tenants)] : []),
      ]),
    ),
  );
  return {
    perSecond: runs.reduce((n, r) => n + r.perSecond, 0),
    p50: median(runs.map((r) => r.p50)),
    p99: Math.max(...runs.map((r) => r.p99)),
  };
}

export async function benchAudit(ctx: BenchContext): Promise<void> {
  const { runs, durationS } = ctx.options;
  // Nothing else appends meanwhile.
  await ctx.topology({ gateways: 1, workers: 0 });
  const grouped: number[] = [];
  const groupedP99: number[] = [];
  const single: number[] = [];
  const singleP99: number[] = [];
  for (let r = 0; r < runs; r++) {
    const g = await appendRun(ctx.db.url, 4, 16, durationS, 'pool');
    const s = await appendRun(ctx.db.url, 1, 8, durationS, 'sql');
    grouped.push(g.perSecond);
    groupedP99.push(g.p99);
    single.push(s.perSecond);
    singleP99.push(s.p99);
    ctx.log(
      `audit append run ${r + 1}: group commit ${fmt(g.perSecond)}/s (p50 ${g.p50.toFixed(1)} ms, p99 ${g.p99.toFixed(1)} ms); one event per commit ${fmt(s.perSecond)}/s (p99 ${s.p99.toFixed(1)} ms)`,
    );
  }
  const append = median(grouped);
  ctx.rows.push({
    section: 'Audit',
    goalId: 'audit-append',
    measure:
      'Audit events appended/s with the chain, 4 processes × 16 concurrent writers calling `appendAudit()` on a pool (how the gateway and workers append outside a transaction: group commit)',
    result: `${medianSpread(grouped)}/s (per-event p99 ${fmt(median(groupedP99), 1)} ms)`,
    baseline: `one event per commit, 8 connections calling \`SELECT audit.append(...)\`: ${fmt(median(single))}/s (p99 ${fmt(median(singleP99), 1)} ms)`,
    goal: 'goal ≥ 2,000/s',
    met: append >= 2000,
    samples: `median of ${runs} × ${durationS} s`,
  });
  // One chain per tenant (migration 080): the same writers spread over 1, 4 and 16 tenants.
  // One tenant is the old single chain's case (every writer waits for one lock); 16 lets
  // every writer of a process have a chain of its own.
  for (const tenants of [1, 4, 16]) {
    const g: number[] = [];
    const gP99: number[] = [];
    const s: number[] = [];
    for (let r = 0; r < runs; r++) {
      const pool = await appendRun(ctx.db.url, 4, 16, durationS, 'pool', tenants);
      const sql = await appendRun(ctx.db.url, 1, 8, durationS, 'sql', tenants);
      g.push(pool.perSecond);
      gP99.push(pool.p99);
      s.push(sql.perSecond);
      ctx.log(
        `audit append over ${tenants} tenant(s), run ${r + 1}: group commit ${fmt(pool.perSecond)}/s (p99 ${pool.p99.toFixed(1)} ms); one event per commit ${fmt(sql.perSecond)}/s (p99 ${sql.p99.toFixed(1)} ms)`,
      );
    }
    ctx.rows.push({
      section: 'Audit',
      measure: `Audit events appended/s with the writers spread over ${tenants} tenant${tenants > 1 ? 's' : ''} (a chain and a lock each): 4 processes × 16 writers on a pool (group commit)`,
      result: `${medianSpread(g)}/s (per-event p99 ${fmt(median(gP99), 1)} ms)`,
      baseline: `one event per commit, 8 connections over ${Math.min(tenants, 8)} tenant(s): ${fmt(median(s))}/s`,
      samples: `median of ${runs} × ${durationS} s`,
    });
  }
  // Diagnostics for the analysis: one writer (no lock waits), and 8 writers without waiting
  // for each commit's WAL flush (never a setting for the real audit trail).
  const one = await appendRun(ctx.db.url, 1, 1, durationS, 'sql');
  const nosync = await appendRun(ctx.db.url, 1, 8, durationS, 'nosync');
  ctx.log(
    `audit append diagnostics: 1 writer ${fmt(one.perSecond)}/s; 8 writers, synchronous_commit=off ${fmt(nosync.perSecond)}/s`,
  );
  ctx.rows.push({
    section: 'Audit',
    measure:
      'Diagnostic: one event per commit with 1 writer / with 8 writers and `synchronous_commit=off`',
    result: `${fmt(one.perSecond)}/s (p50 ${fmt(one.p50, 1)} ms) / ${fmt(nosync.perSecond)}/s`,
    samples: `1 × ${durationS} s each; explains the baseline, not a configuration to use`,
  });

  if (!auditVerifyAvailable()) {
    ctx.rows.push({
      section: 'Audit',
      measure: 'Audit events verified/s',
      result: 'not measured: `npm run audit:verify` does not exist',
      samples: '-',
    });
    return;
  }
  const verified: number[] = [];
  const wall: number[] = [];
  let events = 0;
  let failure = '';
  let busy = '';
  for (let r = 0; r < runs; r++) {
    const meter = cpuMeter({});
    const v = await auditVerify(ctx.db.url);
    const cpu = meter.stop();
    busy = `machine ${(cpu.machineBusy * 100).toFixed(0)}% busy during the last run`;
    if (v.code !== 0 || !v.report) {
      failure = `exit ${v.code}: ${v.output.split('\n')[0]}`;
      ctx.log(`audit:verify failed: ${v.output}`);
      break;
    }
    verified.push(v.report.eventsPerSecond);
    wall.push(v.report.events / (v.wallMs / 1000));
    events = v.report.events;
    ctx.log(
      `audit:verify run ${r + 1}: ${v.report.events} events, ${fmt(v.report.eventsPerSecond)}/s (wall ${fmt(v.wallMs)} ms)`,
    );
  }
  const rate = median(verified);
  ctx.rows.push({
    section: 'Audit',
    measure:
      'Audit events verified/s (`npm run -s audit:verify`, hash + link + gap + column checks)',
    result: failure
      ? `FAILED (${failure})`
      : `${medianSpread(verified)}/s (${fmt(median(wall))}/s counting process start)`,
    goal: 'goal ≥ 50,000/s',
    met: !failure && rate >= 50_000,
    samples: failure
      ? '-'
      : `median of ${verified.length} runs over the ${fmt(events)} events this bench run wrote; ${busy} (verification itself uses about one core)`,
  });
}
