import { PgBoss } from 'pg-boss';
import { queryMaybePrepared, type Pool, type Queryable } from '@mtg/db';
import { traceCarrier } from '@mtg/telemetry';
/** The narrow face of pg-boss the verbs and workers use. */
export interface JobQueue {
  /** Enqueues the task's job on its tool's queue in the caller's transaction (gone on ROLLBACK). */
  enqueue(db: Queryable, job: TaskJob): Promise<void>;
  /**
   * pg-boss's own statement for the task's job, not run: its text and the one parameter it
   * takes, for a statement that inserts the job beside its task (create-task.ts). pg-boss
   * builds it as `send` would and is told the job was inserted.
   */
  jobInsert(job: TaskJob): Promise<JobInsert>;
  boss: PgBoss;
}

/**
 * pg-boss builds a statement (a job's insert, fetch or completion) of another shape than this
 * code embeds in its own: the caller goes the way that needs no embedding. Any other error
 * while pg-boss builds one (the database out of reach while it reads its queue) is passing.
 */
export class UnbuiltStatement extends Error {
  readonly code = 'unbuilt_statement';
}

/** What pg-boss needs of a fetched job to complete it (fenced to the attempt it was fetched at). */
export interface FetchedJob {
  name: string;
  id: string;
  retryCount: number;
}

/**
 * pg-boss's completion of one job as a bare `UPDATE` (no `RETURNING`), whose parameters are
 * `$1` … `$n` with `values`; its `WHERE` is last, so a caller may add a condition with `AND`.
 */
export interface JobCompletion {
  text: string;
  values: unknown[];
}

// What pg-boss 12 sends to complete jobs: its UPDATE inside a WITH that counts the rows.
const COMPLETION_SHAPE =
  /^\s*WITH results AS \(\s*(UPDATE [\s\S]*\bWHERE\b[\s\S]*?)\s+RETURNING id\s*\)\s*SELECT COUNT\(\*\), COALESCE\(array_agg\(id\), '\{\}'::uuid\[\]\) AS ids FROM results\s*$/;

export interface TaskJob {
  queue: string;
  taskId: string;
  jobId: string;
  expireInSeconds: number;
}

/** pg-boss's insert of one job: its text, whose only parameter is `$1`, and that parameter. */
export interface JobInsert {
  text: string;
  value: string;
}

/**
 * How long pg-boss keeps a finished job (completed, failed or cancelled) before a supervision
 * pass deletes it; pg-boss's own default is 7 days. The task's row, journal and audit trail
 * are the record of a task; a finished job is read only to link a poll's span to the trace
 * that started the task. pg-boss's queue counts read its job table whole at each pass, so a
 * week of finished jobs would make every pass cost a week's throughput (docs/scaling.md,
 * "Finished jobs").
 */
export const FINISHED_JOB_SECONDS = 3600;
/**
 * How often a supervision pass may run pg-boss's retention sweep of a queue (pg-boss's
 * default: once a day, which would keep a day of finished jobs past FINISHED_JOB_SECONDS).
 * The sweep walks the queue's jobs, so a queue holds at most this plus FINISHED_JOB_SECONDS
 * of them and each sweep reads that many.
 */
export const JOB_SWEEP_SECONDS = 300;

// A crash uses a retry (pg-boss counts claims), so allow many; the task's own deadline is
// the real bound on how long work may go on.
export const JOB_OPTIONS = {
  retryLimit: 50,
  retryDelay: 1,
  retryBackoff: false,
  deleteAfterSeconds: FINISHED_JOB_SECONDS,
} as const;
export const HEARTBEAT_SECONDS = 10;
/**
 * How often pg-boss's supervision runs (in workers: the maintenance leader's call), and with
 * it its queue monitor: job expiry, lapsed heartbeats and the cached queue counts
 * (`mtg_queue_depth`). A worker that dies while it holds a lease is found by the lease reaper
 * within the lease; pg-boss's heartbeat is only the backstop for one that died between
 * fetching a job and claiming its lease, found within HEARTBEAT_SECONDS + this. Every 2 s (with
 * a monitor each second) it was most of an idle stack's database work: about 15 statements
 * a pass, its queue-count aggregate the dearest.
 */
export const SUPERVISE_SECONDS = 10;

/**
 * Every PgBoss of the product starts without pg-boss's instance registry (its `instance`
 * table, a heartbeat row every 30 s), which samples the event loop on a 20 ms timer in every
 * process that holds a PgBoss, idle or not: 50 wake-ups a second of each gateway and worker.
 * The workers announce themselves in `app.workers`, and nothing reads pg-boss's table.
 */
const WITHOUT_REGISTRY = { registerInstance: false } as const;

/** A pg-boss instance over our pool (so its queries run under the process's role). */
export function createBoss(pool: Pool, options: { supervise: boolean }): PgBoss {
  return new PgBoss({
    db: {
      executeSql: (text: string, values?: unknown[]) => queryMaybePrepared(pool, text, values),
    },
    migrate: false,
    createSchema: false,
    schedule: false,
    // Workers pass false: their maintenance leader calls supervise() itself, so one process
    // supervises however many workers run (packages/runner/src/maintenance.ts).
    supervise: options.supervise,
    // How often a supervise pass may expire jobs and fail lapsed heartbeats (timer or call).
    superviseIntervalSeconds: SUPERVISE_SECONDS,
    monitorIntervalSeconds: SUPERVISE_SECONDS,
    maintenanceIntervalSeconds: JOB_SWEEP_SECONDS,
    ...WITHOUT_REGISTRY,
  });
}

export function createJobQueue(boss: PgBoss): JobQueue {
  const send = (job: TaskJob, executeSql: (text: string, values?: unknown[]) => Promise<unknown>) =>
    boss.send(
      job.queue,
      // The creating request's trace context rides with the job (empty when not tracing).
      { taskId: job.taskId, ...traceCarrier() },
      {
        id: job.jobId,
        ...JOB_OPTIONS,
        heartbeatSeconds: HEARTBEAT_SECONDS,
        expireInSeconds: Math.min(Math.max(job.expireInSeconds, 30), 86_400),
        db: { executeSql: executeSql as never },
      },
    );
  return {
    boss,
    async enqueue(db, job) {
      await send(job, (text, values) => queryMaybePrepared(db, text, values));
    },
    async jobInsert(job) {
      const calls: Array<{ text: string; values: unknown[] }> = [];
      await send(job, async (text, values) => {
        calls.push({ text, values: values ?? [] });
        return { rows: [{ id: job.jobId }] };
      });
      const [call] = calls;
      const value = call?.values[0];
      // One statement whose only parameter is $1, the job as JSON: what this pg-boss sends.
      if (
        calls.length !== 1 ||
        call!.values.length !== 1 ||
        typeof value !== 'string' ||
        (call!.text.match(/\$\d+/g) ?? []).some((n) => n !== '$1')
      )
        throw new UnbuiltStatement(
          'pg-boss no longer inserts a job as one statement of one parameter: the start cannot insert it beside its task',
        );
      return { text: call!.text, value };
    },
  };
}

/**
 * pg-boss's own completion of one fetched job, not run: the `UPDATE` it sends inside its
 * `WITH`, for a statement that ends the task and completes its job at once (end-task.ts).
 * Should a pg-boss release complete a job any other way, this throws and the caller completes
 * the job with pg-boss after the ending, as before.
 */
export async function jobCompletion(
  boss: Pick<PgBoss, 'complete'>,
  job: FetchedJob,
): Promise<JobCompletion> {
  const calls: Array<{ text: string; values: unknown[] }> = [];
  await boss.complete(job.name, { id: job.id, retryCount: job.retryCount }, undefined, {
    db: {
      executeSql: async (text: string, values?: unknown[]) => {
        calls.push({ text, values: values ?? [] });
        return { rows: [{ count: 1, ids: [job.id] }] };
      },
    },
  });
  const [call] = calls;
  const update = call?.text.match(COMPLETION_SHAPE)?.[1];
  // One UPDATE whose WHERE ends it, with nothing after that could change what it matches.
  if (calls.length !== 1 || !update || /\b(RETURNING|FROM|WITH)\b/.test(update))
    throw new UnbuiltStatement(
      'pg-boss no longer completes a job as one UPDATE inside its WITH: a completion cannot complete its job',
    );
  return { text: update, values: call.values };
}

/**
 * pg-boss's fetch of the next job of `queue`, one at a time, not run: the CTEs of its `WITH`
 * (which choose and lock the job) and the `UPDATE` that activates it, for a statement that
 * fetches a job and claims its task at once (claim-task.ts, claimNextJob). Its parameters are
 * `$1` … `$n` with `values`. Should a pg-boss release fetch a job any other way (more than one
 * statement, no `WITH` before one `UPDATE … RETURNING` of the job's id, name and data),
 * this throws and the worker fetches with pg-boss and claims after, as before.
 */
export async function jobFetch(boss: Pick<PgBoss, 'fetch'>, queue: string): Promise<JobFetch> {
  const calls: Array<{ text: string; values: unknown[] }> = [];
  await boss.fetch(queue, {
    batchSize: 1,
    db: {
      executeSql: async (text: string, values?: unknown[]) => {
        calls.push({ text, values: values ?? [] });
        return { rows: [] };
      },
    },
  });
  const [call] = calls;
  const shape = call?.text.match(FETCH_SHAPE);
  if (calls.length !== 1 || !shape || /;/.test(call!.text) || !FETCH_RETURNS.test(shape[2]!))
    throw new UnbuiltStatement(
      'pg-boss no longer fetches a job as one UPDATE after its WITH: a worker cannot claim the task with its fetch',
    );
  return { ...byRowAddress(shape[1]!, shape[2]!), values: call!.values };
}

/**
 * pg-boss's fetch activates the job it chose by joining its `next` CTE on the job's id, which
 * leaves the plan to the statistics: with statistics that say the queue is empty (taken at a
 * quiet hour, or after a reset) and up to about a thousand jobs in the table since, a pooled
 * session's generic plan reads every job of the queue (its finished ones too, kept for an
 * hour) by the primary key's first column and filters them on id, once per fetch. Measured
 * with 600 jobs queued after such statistics: 575 buffers a fetch, against 7 by key. So the
 * chosen job is found by its row address as the CTE locked it (a TID scan, which no
 * statistics change), the id still checked. Should pg-boss's text take another shape, it is
 * kept as it is: right, only planned by the statistics.
 */
function byRowAddress(ctes: string, update: string): { ctes: string; update: string } {
  const chosen = ctes.replace(/^(\s*next AS \(\s*SELECT j\.id)(\s+FROM\s)/, '$1, j.ctid$2');
  const activated = update.replace(
    /\bFROM next\s+WHERE\s+([\s\S]*?)\s+AND j\.id = next\.id\b/,
    'WHERE $1 AND j.ctid = (SELECT ctid FROM next) AND j.id = (SELECT id FROM next)',
  );
  if (chosen === ctes || activated === update) return { ctes, update };
  return { ctes: chosen, update: activated };
}

/** pg-boss's fetch of one job, taken apart (jobFetch). */
export interface JobFetch {
  /** The CTEs of its WITH, without the keyword. */
  ctes: string;
  /** The UPDATE that activates the job, with its RETURNING. */
  update: string;
  values: unknown[];
}

// What pg-boss 12 sends to fetch jobs: CTEs that choose and lock them, then the UPDATE that
// activates them (the only UPDATE at the start of a line), returning the job.
const FETCH_SHAPE =
  /^\s*WITH\s+([\s\S]*\))\s*\n\s*(UPDATE\s+[\w.]+\s+j\s+SET\b[\s\S]*\bRETURNING\b[\s\S]*?)\s*$/;
const FETCH_RETURNS = /\bRETURNING\s+j\.id,\s*name,\s*data,\s*retry_count as "retryCount"/;

/** Queues of `queues` that do not exist yet (the gateway and worker refuse to start then). */
export async function missingQueues(boss: PgBoss, queues: Iterable<string>): Promise<string[]> {
  const missing: string[] = [];
  for (const q of queues) if (!(await boss.getQueue(q))) missing.push(q);
  return missing;
}

/**
 * Installs the pg-boss schema and one queue per long tool (`queues`, from the registry) as
 * the database owner (an existing queue gets this release's FINISHED_JOB_SECONDS), then grants
 * the application roles what pg-boss needs at run time. Idempotent; run by the launcher and
 * `npm run migrate`. Creating a queue goes through pg-boss's `create_queue` (DDL for a
 * queue of its own partition), which this leaves to the owner.
 */
export async function installQueue(
  ownerUrl: string,
  roles: string[],
  queues: Iterable<string>,
): Promise<void> {
  const boss = new PgBoss({
    connectionString: ownerUrl,
    schedule: false,
    supervise: false,
    ...WITHOUT_REGISTRY,
  });
  boss.on('error', () => {});
  await boss.start();
  try {
    for (const queue of queues) {
      const existing = await boss.getQueue(queue);
      if (!existing)
        await boss.createQueue(queue, {
          policy: 'standard',
          ...JOB_OPTIONS,
          heartbeatSeconds: HEARTBEAT_SECONDS,
        });
      // A queue made by an earlier release keeps pg-boss's week; each job carries its own
      // figure too, so jobs sent before the upgrade still leave after theirs.
      else if (existing.deleteAfterSeconds !== FINISHED_JOB_SECONDS)
        await boss.updateQueue(queue, { deleteAfterSeconds: FINISHED_JOB_SECONDS });
    }
  } finally {
    await boss.stop({ graceful: false, close: true });
  }
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: ownerUrl });
  await client.connect();
  try {
    const list = roles.map((r) => pg.escapeIdentifier(r)).join(', ');
    await client.query(`GRANT USAGE ON SCHEMA pgboss TO ${list}`);
    await client.query(
      `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA pgboss TO ${list}`,
    );
    await client.query(`GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA pgboss TO ${list}`);
    await client.query(`GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA pgboss TO ${list}`);
  } finally {
    await client.end();
  }
}

/**
 * Queues some live worker serves holding jobs nobody fetched: created over a second ago (a
 * missed notification, or announced while every worker was full), or a retry that has come
 * due (pg-boss sends no notification for it). The maintenance leader notifies them again.
 * `$1`: how lately a worker must have been seen (WORKER_SEEN_WITHIN_MS). Run by
 * maintenanceSweep, every tick.
 *
 * One probe per served queue and state, each the first job in pg-boss's index on (name, state,
 * blocked, start_after) order (`job_common_i14`), so that a backlog of queued jobs, in this
 * queue or another, costs it no more than one job does. Written as an EXISTS, the generic plan
 * a pooled session keeps, built from statistics that said most jobs were queued (a backlog, or
 * another queue's), scanned every job of the table at each tick: 30 ms a tick with another
 * queue's 100,000 queued jobs, 100 ms with a served queue's, against 0.2 ms this way
 * (docs/scaling.md, "The maintenance leader's probe"). The order and the LIMIT inside a
 * LATERAL keep that index the only cheap path: PostgreSQL drops them from an EXISTS.
 */
export const UNCLAIMED_QUEUES = `SELECT q.name
  FROM (SELECT DISTINCT unnest(w.queues) AS name FROM app.workers w
         WHERE w.seen_at > now() - $1 * interval '1 millisecond') q
  CROSS JOIN LATERAL (
    (SELECT 1 FROM pgboss.job j
      WHERE j.name = q.name AND j.state = 'retry' AND NOT j.blocked AND j.start_after <= now()
      ORDER BY j.start_after LIMIT 1)
    UNION ALL
    (SELECT 1 FROM pgboss.job j
      WHERE j.name = q.name AND j.state = 'created' AND NOT j.blocked AND j.start_after <= now()
        AND j.created_on <= now() - interval '1 second'
      ORDER BY j.start_after LIMIT 1)
    LIMIT 1) due`;
