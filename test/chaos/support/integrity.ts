import { ACTIVE_COUNTS_DRIFT, type CountDrift } from '../../support/active-counts.ts';
import { sql } from '../../support/sql.ts';

/** Batches bulk_update_records writes for `count` records (packages/tools: 500 a batch). */
export const batchesOf = (count: number) => Math.ceil(count / 500);

/**
 * Product bugs found by this suite and reported (see the report in BENCHMARKS.md). They are
 * printed, not failed, unless CHAOS_STRICT=1, so that the suite keeps guarding everything
 * else meanwhile.
 */
export const KNOWN_BUGS = {
  'started-event-lost':
    'a worker killed between claiming a task (app.tasks UPDATE, attempts 0 → 1) and appending ' +
    'task.started (a separate statement in packages/runner/src/run-task.ts) leaves the task without ' +
    'any task.started event: the next worker sees attempts > 1 and writes task.lease_taken instead',
  'drain-aborts-step':
    'on SIGTERM the worker does not let the step in flight finish: run-task.ts check() treats ' +
    '`drain.aborted` as a stop reason and aborts the run signal, and check() runs mid-step too (the ' +
    'lease renewer every leaseMs/3, and before every downstream call), so the step is cut and redone ' +
    'by the next worker instead of being journaled by the leaving one',
  'worker-crash-on-db-restart':
    'a worker process exits with an uncaught "error" event of a pg Client (57P01 terminating ' +
    'connection due to administrator command / Connection terminated unexpectedly) when ' +
    'PostgreSQL restarts: pg-pool removes its error listener from a client while it is checked ' +
    'out, so a session killed between two queries of a transaction (withTransaction, createTask) ' +
    'has nobody listening; only a supervisor restarting the worker brings the tasks back',
} as const;

export interface Integrity {
  problems: string[];
  known: Array<{ bug: keyof typeof KNOWN_BUGS; detail: string }>;
}

/** Fails the calling test on problems; prints known bugs (fails on them with CHAOS_STRICT=1). */
export function expectIntact(label: string, r: Integrity): void {
  for (const k of r.known) process.stderr.write(`${label}: KNOWN BUG (${k.bug}) ${k.detail}\n`);
  if (r.known.length)
    process.stderr.write(
      `${label}: known bug explained: ${[...new Set(r.known.map((k) => KNOWN_BUGS[k.bug]))].join('; ')}\n`,
    );
  expect(r.problems).toEqual([]);
  if (process.env.CHAOS_STRICT === '1') expect(r.known).toEqual([]);
}

/**
 * Everything that must hold for tasks that completed through crashes and restarts, as a list
 * of problems (empty when all is well): completed; one journal row, one `task.step_completed`
 * event and one downstream write per batch; one created/started/completed event each; and
 * the active counts of every tenant and user matching their tasks.
 */
export async function checkIntegrity(
  url: string,
  expected: Map<string, number>,
): Promise<Integrity> {
  const ids = [...expected.keys()];
  const problems: string[] = [];
  const known: Integrity['known'] = [];
  const tasks = await sql<{ id: string; status: string; outcome: string | null }>(
    url,
    `SELECT id, status, outcome FROM app.tasks WHERE id = ANY($1)`,
    [ids],
  );
  if (tasks.length !== ids.length)
    problems.push(`${ids.length - tasks.length} tasks missing from app.tasks`);
  for (const t of tasks) {
    if (t.status !== 'completed' || t.outcome !== 'completed')
      problems.push(`task ${t.id} is ${t.status}/${t.outcome}`);
  }
  const steps = await sql<{ task_id: string; n: number; names: string[] }>(
    url,
    `SELECT task_id, count(*)::int AS n, array_agg(step ORDER BY seq) AS names FROM app.task_steps WHERE task_id = ANY($1) GROUP BY task_id`,
    [ids],
  );
  const stepsOf = new Map(steps.map((s) => [s.task_id, s]));
  const events = await sql<{ task_id: string; type: string; step: string | null; n: number }>(
    url,
    `SELECT task_id, type, CASE WHEN type = 'task.step_completed' THEN body::jsonb -> 'data' ->> 'step' END AS step, count(*)::int AS n
       FROM audit.events WHERE task_id = ANY($1) GROUP BY 1, 2, 3`,
    [ids],
  );
  const writes = await sql<{ task_id: string; n: number; keys: number }>(
    url,
    `SELECT task_id, count(*)::int AS n, count(DISTINCT idempotency_key)::int AS keys FROM downstream.writes WHERE task_id = ANY($1) GROUP BY task_id`,
    [ids],
  );
  const writesOf = new Map(writes.map((w) => [w.task_id, w]));
  for (const [id, batches] of expected) {
    const s = stepsOf.get(id);
    const names = Array.from({ length: batches }, (_, i) => `batch:${i}`);
    if (!s || s.n !== batches || [...s.names].sort().join() !== [...names].sort().join()) {
      problems.push(`task ${id}: journal has ${s?.n ?? 0} steps, expected ${batches}`);
    }
    const mine = events.filter((e) => e.task_id === id);
    for (const type of ['task.created', 'task.started', 'task.completed']) {
      const n = mine.filter((e) => e.type === type).reduce((a, e) => a + e.n, 0);
      const takenOver = mine.some((e) => e.type === 'task.lease_taken');
      if (n === 0 && type === 'task.started' && takenOver)
        known.push({
          bug: 'started-event-lost',
          detail: `task ${id}: no task.started event, only task.lease_taken`,
        });
      else if (n !== 1) problems.push(`task ${id}: ${n} ${type} events`);
    }
    const stepEvents = mine.filter((e) => e.type === 'task.step_completed');
    for (const name of names) {
      const n = stepEvents.find((e) => e.step === name)?.n ?? 0;
      if (n !== 1) problems.push(`task ${id}: ${name} completed ${n} times in the audit trail`);
    }
    if (stepEvents.some((e) => !names.includes(e.step ?? '')))
      problems.push(`task ${id}: step events for unknown steps`);
    const w = writesOf.get(id);
    if (!w || w.n !== batches || w.keys !== batches)
      problems.push(
        `task ${id}: ${w?.n ?? 0} downstream writes (${w?.keys ?? 0} keys), expected ${batches}`,
      );
  }
  // The active counts a start's admission reads (migration 230) match the tasks, whatever
  // crashed or restarted on the way.
  for (const d of await sql<CountDrift>(url, ACTIVE_COUNTS_DRIFT))
    problems.push(
      `active count of ${d.tenant}${d.subject === null ? '' : `/${d.subject}`}: kept ${d.kept}, actual ${d.actual}`,
    );
  return { problems, known };
}

/**
 * The audit chains in SQL: in each chain (one per tenant, and chain 0), seq 1..n without gaps
 * or duplicates, each event linked to the one before in its chain.
 */
export async function chainProblems(url: string): Promise<string[]> {
  const rows = await sql<{
    chain: number;
    n: number;
    distinct_seq: number;
    max_seq: number;
    broken_links: number;
  }>(
    url,
    `SELECT chain_id::int AS chain, count(*)::int AS n, count(DISTINCT seq)::int AS distinct_seq,
            coalesce(max(seq), 0)::int AS max_seq,
            count(*) FILTER (WHERE prev_hash IS DISTINCT FROM prev)::int AS broken_links
       FROM (SELECT chain_id, seq, prev_hash,
                    lag(hash, 1, repeat('0', 64)) OVER (PARTITION BY chain_id ORDER BY seq) AS prev
               FROM audit.events) e
      GROUP BY chain_id ORDER BY chain_id`,
  );
  const problems: string[] = [];
  for (const r of rows) {
    const c = `chain ${r.chain}: `;
    if (r.n !== r.distinct_seq) problems.push(`${c}${r.n - r.distinct_seq} duplicate seq values`);
    if (r.max_seq !== r.n) problems.push(`${c}seq has gaps: ${r.n} events up to seq ${r.max_seq}`);
    if (r.broken_links > 0)
      problems.push(
        `${c}${r.broken_links} events whose prev_hash is not the previous event's hash`,
      );
  }
  return problems;
}
