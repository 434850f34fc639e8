import type pg from 'pg';
import type { Pool } from '@mtg/db';
import {
  claimTask,
  completeTask,
  journalStep,
  readBoundary,
  renewLease,
  type Lease,
} from '../../src/task-state/index.ts';
import { scansOf, type PlanNode } from './plan-scans.ts';
import { insertTask, openStateDatabase, type StateDatabase } from './state-database.ts';

// The statements a run makes for its one task (claim, boundary read, renewal, journal,
// settlement) find that task by its primary key whatever the planner's statistics say. Here
// they say no task is active: they were taken over 2,000 ended tasks, and then 300 active,
// leased tasks arrived, as a burst after a quiet hour would. A pooled session runs each
// statement from a generic plan (from its sixth execution on, PostgreSQL's default); with
// these statistics a statement written with ACTIVE (status IN working, input_required) got a
// full scan of a partial index over active tasks, filtering on id, which reads every active
// task (predicates.ts, NOT_ENDED).
let s: StateDatabase;
let session: pg.PoolClient;
let taskId: string;
let lease: Lease;

beforeAll(async () => {
  s = await openStateDatabase();
  await s.admin.query(
    `INSERT INTO app.tasks (id, issuer, tenant, subject, client, scopes, tool, arguments,
       argument_summary, argument_hash, idempotency_key, idempotency_kind, correlation_id,
       status, status_message, created_at, updated_at, started_at, ended_at, deadline, ttl_ms,
       outcome, ended_by, lease_epoch, attempts, job_queue)
     SELECT md5('ended-' || i), 'https://idp.test', 'acme', 'u' || (i % 32), 'agent', '{}',
       'slow_tool', '{}', '{}', 'h', 'ended-' || i, 'explicit', 'c', 'completed', 'done',
       now(), now(), now(), now(), now() + interval '1 hour', 3600000, 'completed',
       '{"path":"worker"}', 1, 1, 'state-test'
       FROM generate_series(1, 2000) i`,
  );
  await s.admin.query('ANALYZE app.tasks');
  await s.admin.query(
    `INSERT INTO app.tasks (id, issuer, tenant, subject, client, scopes, tool, arguments,
       argument_summary, argument_hash, idempotency_key, idempotency_kind, correlation_id,
       status, status_message, created_at, updated_at, started_at, deadline, ttl_ms,
       lease_owner, lease_epoch, lease_expires_at, attempts, job_queue)
     SELECT md5('burst-' || i), 'https://idp.test', 'acme', 'u' || (i % 32), 'agent', '{}',
       'slow_tool', '{}', '{}', 'h', 'burst-' || i, 'explicit', 'c', 'working', 'started',
       now(), now(), now(), now() + interval '1 hour', 3600000,
       'w-burst', 1, now() + interval '1 hour', 1, 'state-test'
       FROM generate_series(1, 300) i`,
  );
  session = await s.worker.connect();
  await session.query('SET plan_cache_mode = force_generic_plan');
  taskId = await insertTask(s.admin);
  // The session stands for the pool where a function takes one: each is one statement.
  const pool = session as unknown as Pool;
  const c = await claimTask(pool, { taskId, workerId: 'w1', leaseMs: 60_000 });
  if (c.kind !== 'claimed') throw new Error(`not claimed: ${c.kind}`);
  lease = c.lease;
  await readBoundary(session, taskId, lease);
  await renewLease(session, taskId, lease, 60_000, { current: 1, total: 2 });
  await journalStep(
    session,
    taskId,
    lease,
    { name: 'one', seq: 1, output: 1, startedAt: new Date() },
    () => ({ type: 'task.step_completed', taskId, tenant: 'acme', subject: 'alice' }),
  );
  const text = JSON.stringify({ content: [] });
  const settled = await completeTask(
    { pool },
    {
      taskId,
      lease,
      workerId: 'w1',
      finished: { result: { content: [] }, text, sizeBytes: text.length, deleteOnRead: false },
      runMs: 1,
      downstreamSystems: [],
    },
  );
  if (!settled) throw new Error('not settled');
});
afterAll(async () => {
  session?.release();
  await s?.close();
});

test('each statement of a run reads app.tasks by its primary key, with stale statistics', async () => {
  const prepared = await session.query<{ name: string; statement: string; n: number }>(
    `SELECT name, statement, cardinality(parameter_types) AS n FROM pg_prepared_statements
      WHERE NOT from_sql AND statement ~ 'app\\.tasks'`,
  );
  const kinds = prepared.rows.map((r) => r.statement.replace(/\s+/g, ' ').slice(0, 40));
  // claim, boundary read, renewal, journal, settlement (and the claim's reading of the
  // tool's row): each was prepared on this session.
  expect(prepared.rows.length).toBeGreaterThanOrEqual(5);
  const offending: string[] = [];
  for (const r of prepared.rows) {
    const nulls = Array.from({ length: r.n }, () => 'NULL').join(', ');
    const explained = await session.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(
      `EXPLAIN (FORMAT JSON) EXECUTE ${r.name}${r.n ? `(${nulls})` : ''}`,
    );
    for (const scan of scansOf(explained.rows[0]!['QUERY PLAN'][0]!.Plan, 'tasks')) {
      const byId = scan['Index Name'] === 'tasks_pkey' && /\bid = /.test(scan['Index Cond'] ?? '');
      if (!byId) {
        offending.push(
          `${r.statement.replace(/\s+/g, ' ').slice(0, 60)}… → ${scan['Node Type']} ${scan['Index Name'] ?? ''} ${scan['Index Cond'] ?? '(no index condition)'}`,
        );
      }
    }
  }
  expect({ kinds, offending }).toEqual({ kinds, offending: [] });
});
