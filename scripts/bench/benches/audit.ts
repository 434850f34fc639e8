// The audit chain: appends/s under 8 concurrent writers, and verification speed.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchContext } from '../lib/context.ts';
import { runJsonScript } from '../lib/child-json.ts';
import { cpuMeter } from '../lib/cpu.ts';
import { REPO_ROOT } from '../lib/process-stack.ts';
import { fmt, median } from '../lib/stats.ts';

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

export async function benchAudit(ctx: BenchContext): Promise<void> {
  const { runs, durationS } = ctx.options;
  // Nothing else appends meanwhile.
  await ctx.topology({ gateways: 1, workers: 0 });
  const rates: number[] = [];
  const p99: number[] = [];
  for (let r = 0; r < runs; r++) {
    const a = await runJsonScript<{
      perSecond: number;
      appended: number;
      p50: number;
      p99: number;
    }>(APPEND, [ctx.db.url, '8', String(durationS)]);
    rates.push(a.perSecond);
    p99.push(a.p99);
    ctx.log(
      `audit append run ${r + 1}: ${fmt(a.perSecond)}/s (p50 ${a.p50.toFixed(1)} ms, p99 ${a.p99.toFixed(1)} ms)`,
    );
  }
  const append = median(rates);
  ctx.rows.push({
    section: 'Audit',
    measure:
      'Audit events appended/s, 8 connections calling `SELECT audit.append(...)` (autocommit)',
    result: `${fmt(append)}/s (per-call p99 ${fmt(median(p99), 1)} ms)`,
    goal: 'goal ≥ 2,000/s',
    met: append >= 2000,
    samples: `median of ${runs} × ${durationS} s`,
  });
  // Diagnostics for the analysis: one writer (no lock waits), and 8 writers without waiting
  // for each commit's WAL flush (never a setting for the real audit trail).
  const single = await runJsonScript<{ perSecond: number; p50: number }>(APPEND, [
    ctx.db.url,
    '1',
    String(durationS),
  ]);
  const nosync = await runJsonScript<{ perSecond: number; p50: number }>(APPEND, [
    ctx.db.url,
    '8',
    String(durationS),
    'nosync',
  ]);
  ctx.log(
    `audit append diagnostics: 1 writer ${fmt(single.perSecond)}/s; 8 writers, synchronous_commit=off ${fmt(nosync.perSecond)}/s`,
  );
  ctx.rows.push({
    section: 'Audit',
    measure: 'Diagnostic: the same with 1 writer / with 8 writers and `synchronous_commit=off`',
    result: `${fmt(single.perSecond)}/s (p50 ${fmt(single.p50, 1)} ms) / ${fmt(nosync.perSecond)}/s`,
    samples: `1 × ${durationS} s each; explains the row above, not a configuration to use`,
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
      : `${fmt(rate)}/s (${fmt(median(wall))}/s counting process start)`,
    goal: 'goal ≥ 50,000/s',
    met: !failure && rate >= 50_000,
    samples: failure
      ? '-'
      : `median of ${verified.length} runs over the ${fmt(events)} events this bench run wrote; ${busy} (verification itself uses about one core)`,
  });
}
