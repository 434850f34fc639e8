// What every benchmark shares: options, the database, the process stack and its topology,
// a pool of users' tokens, and the result rows that end up in BENCHMARKS.md.
import pg from 'pg';
import type { TestDatabase } from '../../../test/support/database.ts';
import type { ProcessStack } from './process-stack.ts';
import { sleep } from './stats.ts';

export interface BenchOptions {
  /** Repetitions of each throughput measurement; the median is reported. */
  runs: number;
  /** Seconds of load per throughput run. */
  durationS: number;
  /** Concurrent HTTP connections of the load generator. */
  connections: number;
  /** Samples for the latency measurements (pickup, cancel). */
  samples: number;
  logLevel: string;
  only?: Set<string>;
}

export interface Row {
  section: string;
  measure: string;
  result: string;
  baseline?: string;
  /** "ratio 0.42 (goal ≥ 0.5)" or "goal ≤ 20 ms". */
  goal?: string;
  met?: boolean;
  /** Names a goal for the Goals section (and its "what limits it" prose when not met). */
  goalId?: string;
  samples: string;
  note?: string;
}

export interface UserToken {
  sub: string;
  tenant: string;
  token: string;
}

export interface Topology {
  gateways: number;
  workers: number;
  gatewayEnv?: Record<string, string>;
  workerEnv?: Record<string, string>;
  /**
   * Start every wanted process anew, even one already running with the same environment: for
   * a bench that reads a process's memory from its start, not what an earlier bench left.
   */
  fresh?: boolean;
}

export interface BenchContext {
  options: BenchOptions;
  db: TestDatabase;
  stack: ProcessStack;
  /** 8 tenants × 4 users, so per-user and per-tenant caps and locks spread. */
  users: UserToken[];
  sql<T extends pg.QueryResultRow = any>(text: string, values?: unknown[]): Promise<T[]>;
  /**
   * The backends of the bench's own sessions (`sql`): they watch the batches (a count every
   * 25 ms while one runs), which is the bench's work, not the stack's, so the CPU meters leave
   * them out (`stackBackends`).
   */
  ownBackends: ReadonlySet<number>;
  /**
   * `sql`, planned with sequential and bitmap scans off (for its transaction only): for the
   * bench's own watch statements, which look tasks up by id. A reset leaves the statistics of
   * empty tables, and planned on them `id = ANY(…)` over a batch's ids chose a bitmap scan of
   * tasks_owner once per id (4,800 buffers, 15–22 ms every 25 ms): half a core taken from the
   * stack it measures.
   */
  sqlByIndex<T extends pg.QueryResultRow = any>(text: string, values?: unknown[]): Promise<T[]>;
  /** Stops running tasks (as a cancel would) and deletes every task and task job. */
  reset(): Promise<void>;
  /**
   * What autovacuum would have done by now with the dead rows the work so far left (VACUUM
   * (ANALYZE) of the tables a task churns), without removing anything: reset() ends with it.
   */
  vacuum(): Promise<void>;
  topology(t: Topology): Promise<void>;
  rows: Row[];
  /** Markdown printed after a section's table (per-phase tables, method notes). */
  blocks: Array<{ section: string; lines: string[] }>;
  notes: string[];
  log(message: string): void;
  close(): Promise<void>;
}

export function createContext(
  options: BenchOptions,
  db: TestDatabase,
  stack: ProcessStack,
  users: UserToken[],
): BenchContext {
  const pool = new pg.Pool({ connectionString: db.url, max: 3, application_name: 'bench' });
  pool.on('error', () => {});
  const ownBackends = new Set<number>();
  // The backend's pid arrives with the connection (BackendKeyData): known before any query.
  pool.on('connect', (client) => {
    const pid = (client as pg.PoolClient & { processID: number | null }).processID;
    if (pid !== null) ownBackends.add(pid);
  });
  const sql = async <T extends pg.QueryResultRow>(text: string, values: unknown[] = []) =>
    (await pool.query<T>(text, values)).rows;
  const envKey = new Map<string, string>();
  const sqlByIndex = async <T extends pg.QueryResultRow>(text: string, values: unknown[] = []) => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SET LOCAL enable_seqscan = off');
      await client.query('SET LOCAL enable_bitmapscan = off');
      const rows = (await client.query<T>(text, values)).rows;
      await client.query('COMMIT');
      return rows;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  };

  const vacuum = async () => {
    // What autovacuum (on by default) would do with what the measurement before left: on
    // a server without it, each measurement would otherwise pay for the dead rows of all
    // those before it (the maintenance leader's probes, the fetch, the renewals walk them).
    await sql(`VACUUM (ANALYZE) app.tasks, app.task_steps, app.task_results,
                 app.task_credentials, app.task_inputs, app.task_progress_tokens,
                 app.status_read_marks, app.rate_limits, app.workers, app.principals,
                 app.active_tenants, app.active_subjects, audit.chains,
                 pgboss.job, pgboss.queue`);
  };
  const ctx: BenchContext = {
    options,
    db,
    stack,
    users,
    sql,
    sqlByIndex,
    ownBackends,
    rows: [],
    blocks: [],
    notes: [],
    log: (m) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${m}\n`),
    close: () => pool.end(),
    async reset() {
      await sql(`UPDATE app.tasks SET cancel_requested_at = now(),
                   cancel_requested_by = '{"path":"owner","reason":"bench reset"}'
                  WHERE status IN ('working', 'input_required')`);
      await sql(`SELECT pg_notify('mtg_task_control', json_build_object('taskId', id, 'action', 'cancel')::text)
                   FROM app.tasks WHERE status IN ('working', 'input_required') AND lease_owner IS NOT NULL`);
      for (let i = 0; i < 100; i++) {
        const [row] = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM app.tasks
          WHERE status IN ('working', 'input_required') AND lease_expires_at > now()`);
        if (row!.n === 0) break;
        await sleep(100);
      }
      // A seeded history (scripts/bench/seed-volume.ts, tenants vol-*) stays: it is the load.
      await sql(`DELETE FROM app.tasks WHERE tenant NOT LIKE 'vol-%'`);
      // The tools' jobs, and the queues the bench makes of its own (the raw pg-boss send
      // baseline's, the pickup's): a baseline's tens of thousands of queued jobs left behind
      // were read by every later measurement's maintenance probe (docs/scaling.md, "The
      // maintenance leader's probe").
      await sql(`DELETE FROM pgboss.job WHERE name LIKE 'tool.%' OR name LIKE 'bench-%'`);
      await vacuum();
    },
    vacuum,
    async topology(t) {
      const gEnv = JSON.stringify(t.gatewayEnv ?? {});
      const wEnv = JSON.stringify(t.workerEnv ?? {});
      const work: Promise<unknown>[] = [];
      for (let i = 0; i < stack.gatewayUrls.length; i++) {
        const p = stack.gateways[i];
        const key = `gateway-${i}`;
        const want = i < t.gateways;
        const current = !t.fresh && p?.running() && envKey.get(key) === gEnv;
        if (p?.running() && (!want || !current)) await p.stop();
        if (want && !current) {
          envKey.set(key, gEnv);
          work.push(stack.startGateway(i, t.gatewayEnv));
        }
      }
      for (let i = 1; i <= 8; i++) {
        const id = `worker-${i}`;
        const p = stack.workers.get(id);
        const want = i <= t.workers;
        const current = !t.fresh && p?.running() && envKey.get(id) === wEnv;
        if (p?.running() && (!want || !current)) await p.stop();
        if (want && !current) {
          envKey.set(id, wEnv);
          work.push(stack.startWorker(id, t.workerEnv));
        }
      }
      await Promise.all(work);
    },
  };
  return ctx;
}
