import type pg from 'pg';
import type { Pool } from '@mtg/db';
import { jobFetch } from '../../src/job-queue.ts';
import { claimNextJob } from '../../src/task-state/index.ts';
import { scansOf, type PlanNode } from './plan-scans.ts';
import { insertTask, openStateDatabase, QUEUE, type StateDatabase } from './state-database.ts';

// A worker's fetch of the next job (pg-boss's, embedded in claimNextJob) reads the job it
// takes, not the queue, whatever the planner's statistics say. Here they say the queue is
// empty (taken after a quiet hour, or the bench's reset), and then 600 jobs arrive. A pooled
// session runs the statement from a generic plan; with these statistics pg-boss's own text,
// which joins its chosen job back by id, read every job of the queue by the primary key's
// first column and filtered them on id (job-queue.ts, byRowAddress).
let s: StateDatabase;
let session: pg.PoolClient;

beforeAll(async () => {
  s = await openStateDatabase();
  await s.admin.query('ANALYZE pgboss.job_common');
  await s.admin.query(
    `INSERT INTO pgboss.job_common (name, id, data)
     SELECT $1, gen_random_uuid(), jsonb_build_object('taskId', gen_random_uuid())
       FROM generate_series(1, 600)`,
    [QUEUE],
  );
  session = await s.worker.connect();
  await session.query('SET plan_cache_mode = force_generic_plan');
});
afterAll(async () => {
  session?.release();
  await s?.close();
});

/** Every scan of pgboss.job_common in the plan: the job rows it read, kept or filtered out. */
const jobRowsRead = (plan: PlanNode) =>
  scansOf(plan, 'job_common').map((node) => ({
    scan: node['Node Type'],
    rows:
      ((node['Actual Rows'] ?? 0) + (node['Rows Removed by Filter'] ?? 0)) *
      (node['Actual Loops'] ?? 1),
  }));

test('the fetch with its claim reads one job row per scan, with statistics of an empty queue', async () => {
  const taskId = await insertTask(s.admin);
  const fetch = await jobFetch(s.queue.boss, QUEUE);
  // The job of a real task goes first (a higher priority), so the claim takes it.
  await s.queue.boss.send(QUEUE, { taskId }, { priority: 1 });
  // The session as the pool claimNextJob takes, keeping the statement it sends.
  const sent: pg.QueryConfig[] = [];
  const recording = {
    query: (config: pg.QueryConfig) => {
      sent.push(config);
      return session.query(config);
    },
  };
  const got = await claimNextJob<{ taskId: string }>(recording as unknown as Pool, {
    queue: QUEUE,
    fetch,
    workerId: 'w1',
    leaseMs: 60_000,
  });
  expect(got?.claim?.task.id).toBe(taskId);
  expect(sent).toHaveLength(1);

  // The same statement again, with the plan the session keeps for it: it takes the next job.
  const { name, values } = sent[0]!;
  await session.query('BEGIN');
  try {
    const explained = await session.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
      `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ${name}(${(values ?? []).map(literal).join(', ')})`,
    );
    const scans = jobRowsRead(explained.rows[0]!['QUERY PLAN'][0]!.Plan);
    // The choice of the next job (one row, in the queue's order) and its activation (that row).
    expect(scans).toEqual([
      { scan: 'Index Scan', rows: 1 },
      { scan: 'Tid Scan', rows: 1 },
    ]);
  } finally {
    await session.query('ROLLBACK');
  }
});

/** A value as an SQL literal, for EXECUTE's arguments (which take no bound parameters). */
function literal(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'number') return String(v);
  if (typeof v === 'string') return session.escapeLiteral(v);
  if (Array.isArray(v)) return v.length ? `ARRAY[${v.map(literal).join(', ')}]` : `'{}'`;
  throw new Error(`no literal for ${JSON.stringify(v)}`);
}
