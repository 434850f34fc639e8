// Where the CPU went during a measurement: per process group, from /proc (Linux only; elsewhere
// every figure is reported as unavailable). On 2 shared cores this is what explains a ratio.
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';

const TICK_MS = 10; // CLK_TCK is 100 on Linux x86-64

/** A process's CPU time so far (all its threads), in ms: utime + stime, in 10 ms ticks. */
export function cpuMsOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command (which may contain spaces) in parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS; // utime + stime
  } catch {
    return undefined;
  }
}

/**
 * A process's CPU time so far, in ms, from the scheduler's own count in nanoseconds: the first
 * field of /proc/<pid>/task/<tid>/schedstat, summed over its threads (a PostgreSQL backend has
 * one; a Node process has its main thread, V8's and libuv's). Ticks do for a busy process; a
 * backend that works a few milliseconds in a window reads 0 or 10 in them, which over eight
 * such backends was most of the idle row's figure. A thread that ended within the window
 * takes its count with it.
 */
export function schedCpuMsOf(pid: number): number | undefined {
  try {
    let ns = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      } catch {
        // the thread ended meanwhile
      }
    }
    return Number.isFinite(ns) ? ns / 1e6 : cpuMsOf(pid);
  } catch {
    return cpuMsOf(pid);
  }
}

function ppidOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

/**
 * PostgreSQL's work for one database: its backends (their title names it: `postgres:
 * [cluster:] user db host(port) …`) and the shared background processes of the same server
 * (WAL writer, checkpointer, autovacuum …), which work for every database on it; with
 * `background: false` the backends alone.
 */
export function postgresBackends(
  database: string,
  options: { background?: boolean } = {},
): number[] {
  const titles = new Map<number, string[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmd.startsWith('postgres: '))
        titles.set(Number(entry), cmd.replace(/\0+/g, ' ').trim().split(' '));
    } catch {
      // exited meanwhile
    }
  }
  const backends = [...titles].filter(([, words]) => words.includes(database)).map(([pid]) => pid);
  if (options.background === false) return backends;
  const servers = new Set(backends.map(ppidOf));
  const background = [...titles]
    .filter(([pid, words]) => servers.has(ppidOf(pid)) && !words.some((w) => w.includes('(')))
    .map(([pid]) => pid);
  return [...backends, ...background];
}

/**
 * The stack's PostgreSQL CPU: `postgresBackends` of the bench database without the bench's
 * own sessions (BenchContext.ownBackends).
 */
export function stackBackends(
  ctx: { db: { name: string }; ownBackends: ReadonlySet<number> },
  options: { background?: boolean } = {},
): number[] {
  return postgresBackends(ctx.db.name, options).filter((pid) => !ctx.ownBackends.has(pid));
}

function machineBusyMs(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8')
    .split('\n')[0]!
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const idle = line[3]! + line[4]!;
  const total = line.reduce((a, b) => a + b, 0);
  return { busy: (total - idle) * TICK_MS, total: total * TICK_MS };
}

export type PidSource = () => number[];

export interface CpuReport {
  /** CPU milliseconds per group over the measured interval. */
  ms: Record<string, number>;
  /** Busy share of the whole machine (all cores) over the interval, 0..1. */
  machineBusy: number;
  /** CPU ms of everything not in a group (other processes on the machine, the kernel). */
  otherMs: number;
  wallMs: number;
}

/** Starts measuring the CPU time of each group of processes; stop() reports the differences. */
/** `precise`: read with schedCpuMsOf (the scheduler's count) instead of in 10 ms ticks. */
export function cpuMeter(groups: Record<string, PidSource>, options: { precise?: boolean } = {}) {
  const cpuOf = options.precise ? schedCpuMsOf : cpuMsOf;
  const snapshot = () => {
    const s = new Map<string, Map<number, number>>();
    for (const [name, pids] of Object.entries(groups)) {
      const m = new Map<number, number>();
      for (const pid of pids()) {
        const ms = cpuOf(pid);
        if (ms !== undefined) m.set(pid, ms);
      }
      s.set(name, m);
    }
    return s;
  };
  const before = snapshot();
  const machineBefore = machineBusyMs();
  const started = performance.now();
  return {
    stop(): CpuReport {
      const after = snapshot();
      const machineAfter = machineBusyMs();
      const ms: Record<string, number> = {};
      for (const [name, m] of after) {
        let sum = 0;
        for (const [pid, t] of m) sum += t - (before.get(name)?.get(pid) ?? 0);
        ms[name] = sum;
      }
      const busy = machineAfter.busy - machineBefore.busy;
      const total = machineAfter.total - machineBefore.total;
      return {
        ms,
        machineBusy: total > 0 ? busy / total : NaN,
        otherMs: busy - Object.values(ms).reduce((a, b) => a + b, 0),
        wallMs: performance.now() - started,
      };
    },
  };
}

/**
 * "CPU ms per request: gateway 4.1, idp 9.0, postgres 3.2; machine 98% busy, 12% of it outside
 * the bench" (`extra` adds groups measured elsewhere, e.g. the load generator's own report).
 */
export function describeCpu(
  report: CpuReport,
  requests: number,
  unit = 'request',
  extra: Record<string, number> = {},
): string {
  const all = { ...report.ms, ...extra };
  const parts = Object.entries(all).map(
    ([name, ms]) => `${name} ${(ms / Math.max(1, requests)).toFixed(1)}`,
  );
  const capacityMs = report.wallMs * os.cpus().length;
  const outside = Math.max(0, report.otherMs - Object.values(extra).reduce((a, b) => a + b, 0));
  return (
    `CPU ms per ${unit}: ${parts.join(', ')}; machine ${(report.machineBusy * 100).toFixed(0)}% busy, ` +
    `${((outside / capacityMs) * 100).toFixed(0)}% of its capacity used outside the bench`
  );
}
