// PostgreSQL CPU of the stack's sessions over one measurement, by what opened them (their
// application_name): which share grows with the worker count (the Scaling rows). Found with
// it: every ending's notification woke every worker's listening session (docs/scaling.md).
import type { BenchContext } from './context.ts';
import { threadCpuMsOf } from './cpu.ts';

const KINDS: Array<[RegExp, string]> = [
  [/^task-events$/, 'listening'],
  [/^gateway(-read)?$/, 'gateway'],
  [/^downstream$/, 'downstream'],
  [/^console/, 'console'],
];

/** A session's kind: anything not named above is a worker's pool (it is named by its id). */
const kindOf = (app: string) => KINDS.find(([re]) => re.test(app))?.[1] ?? 'worker pools';

type Session = { pid: number; app: string };

async function sessions(ctx: BenchContext): Promise<Session[]> {
  const rows = await ctx.sql<Session>(
    `SELECT pid, application_name AS app FROM pg_stat_activity
      WHERE datname = current_database() AND backend_type = 'client backend'`,
  );
  return rows.filter((r) => !ctx.ownBackends.has(r.pid));
}

/**
 * Starts counting; `stop` gives ms of CPU by kind. A session opened meanwhile counts whole (it
 * did all its work within); one closed meanwhile is lost (the warm-up batch opens them).
 */
export async function sessionMeter(ctx: BenchContext) {
  const start = new Map((await sessions(ctx)).map((s) => [s.pid, threadCpuMsOf(s.pid) ?? 0]));
  return {
    async stop(): Promise<Record<string, number>> {
      const ms: Record<string, number> = {};
      for (const s of await sessions(ctx)) {
        const now = threadCpuMsOf(s.pid);
        if (now === undefined) continue;
        const kind = kindOf(s.app);
        ms[kind] = (ms[kind] ?? 0) + now - (start.get(s.pid) ?? 0);
      }
      return ms;
    },
  };
}

/** `ms` per task, largest first: "worker pools 6.2, downstream 1.1, …". */
export function describeSessions(ms: Record<string, number>, tasks: number): string {
  return Object.entries(ms)
    .map(([kind, v]) => [kind, v / Math.max(1, tasks)] as const)
    .filter(([, v]) => v >= 0.005)
    .sort((a, b) => b[1] - a[1])
    .map(([kind, v]) => `${kind} ${v.toFixed(2)}`)
    .join(', ');
}
