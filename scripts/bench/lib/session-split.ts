// PostgreSQL CPU of the stack's sessions over one measurement, grouped by what opened them
// (their application_name): which share grows with the worker count (the Scaling rows), what
// idle workers' sessions do (the idle bench's log). Found with it: every ending's notification
// woke every worker's listening session (docs/scaling.md).
import type { BenchContext } from './context.ts';
import { schedCpuMsOf } from './cpu.ts';
import { fmt } from './stats.ts';

/** A backend of the bench database, not one of the bench's own. */
export interface Session {
  pid: number;
  app: string;
  type: string;
}

/** One group's CPU over the measurement, and how much of it went to sessions opened meanwhile. */
export interface SessionTally {
  ms: number;
  sessions: number;
  born: number;
  bornMs: number;
}

const KINDS: Array<[RegExp, string]> = [
  [/^task-events$/, 'listening'],
  [/^gateway(-read)?$/, 'gateway'],
  [/^downstream$/, 'downstream'],
  [/^console/, 'console'],
];

/**
 * A client session's kind: anything not named above is a worker's pool (it is named by its
 * id). The server's own processes are left out.
 */
export const byKind = (s: Session) =>
  s.type === 'client backend'
    ? (KINDS.find(([re]) => re.test(s.app))?.[1] ?? 'worker pools')
    : undefined;

/** Every session by its application_name (the server's own by their backend type). */
export const byName = (s: Session) => s.app || s.type;

async function sessions(ctx: BenchContext): Promise<Session[]> {
  const rows = await ctx.sql<Session>(
    `SELECT pid, application_name AS app, backend_type AS type FROM pg_stat_activity
      WHERE datname = current_database()`,
  );
  return rows.filter((r) => !ctx.ownBackends.has(r.pid));
}

/**
 * Starts counting; `stop` gives each group's CPU (`groupOf`; undefined leaves a session
 * out). A session opened meanwhile counts whole (it did all its work within); one closed
 * meanwhile is lost (a warm-up opens them).
 */
export async function sessionMeter(ctx: BenchContext, groupOf: (s: Session) => string | undefined) {
  const start = new Map((await sessions(ctx)).map((s) => [s.pid, schedCpuMsOf(s.pid) ?? 0]));
  return {
    async stop(): Promise<Map<string, SessionTally>> {
      const groups = new Map<string, SessionTally>();
      for (const s of await sessions(ctx)) {
        const group = groupOf(s);
        const now = schedCpuMsOf(s.pid);
        if (group === undefined || now === undefined) continue;
        const before = start.get(s.pid);
        const ms = now - (before ?? 0);
        const g = groups.get(group) ?? { ms: 0, sessions: 0, born: 0, bornMs: 0 };
        g.ms += ms;
        g.sessions += 1;
        if (before === undefined) {
          g.born += 1;
          g.bornMs += ms;
        }
        groups.set(group, g);
      }
      return groups;
    },
  };
}

/** Each group's ms per task, largest first: "worker pools 6.20, downstream 1.10, …". */
export function describeSessions(groups: Map<string, SessionTally>, tasks: number): string {
  return [...groups]
    .map(([kind, g]) => [kind, g.ms / Math.max(1, tasks)] as const)
    .filter(([, v]) => v >= 0.005)
    .sort((a, b) => b[1] - a[1])
    .map(([kind, v]) => `${kind} ${v.toFixed(2)}`)
    .join(', ');
}

/** "worker-3 12.0 ms (2 sessions, 1 opened in the window: 9.0 ms), …", largest first. */
export function describeSessionTotals(groups: Map<string, SessionTally>): string {
  return [...groups]
    .sort((a, b) => b[1].ms - a[1].ms)
    .map(
      ([name, g]) =>
        `${name} ${fmt(g.ms, 1)} ms (${g.sessions} session${g.sessions > 1 ? 's' : ''}${g.born ? `, ${g.born} opened in the window: ${fmt(g.bornMs, 1)} ms` : ''})`,
    )
    .join(', ');
}
