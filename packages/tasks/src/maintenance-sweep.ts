import { prepared, runPrepared, type Queryable } from '@mtg/db';
import { UNCLAIMED_QUEUES } from './job-queue.ts';
import { WORKER_SEEN_WITHIN_MS } from './live-workers.ts';
import { REAP_EXPIRED_LEASES } from './task-state/lease.ts';
import { LATE_TASKS, type LateTask } from './task-state/purge-tasks.ts';
import type { TaskRow } from './task-row.ts';

/** What the maintenance leader acts on at a tick. */
export interface Sweep {
  /** Leases reaped (their worker died): fail each job so pg-boss retries it at once. */
  reaped: Array<Pick<TaskRow, 'id' | 'job_id' | 'job_queue'>>;
  /** Active tasks past their deadline. */
  late: LateTask[];
  /** Queues with work nobody fetched, to announce again. */
  unclaimed: string[];
}

// The reaper, the deadline sweep's read and the re-announcement's probe in one statement: the
// leader's tick each second was three wake-ups of its session, most of an idle stack's
// database work once pg-boss's supervision ran every 10 s. One snapshot for all three: the
// deadline read sees a reaped task as before the reaper, and a lease it reaps had lapsed, so
// `live` is false either way.
const SWEEP = prepared(`WITH reaped AS (${REAP_EXPIRED_LEASES}),
  late AS (${LATE_TASKS}),
  unclaimed AS (${UNCLAIMED_QUEUES})
SELECT (SELECT coalesce(json_agg(r), '[]') FROM reaped r) AS reaped,
       (SELECT coalesce(json_agg(l), '[]') FROM late l) AS late,
       (SELECT coalesce(json_agg(name), '[]') FROM unclaimed) AS unclaimed`);

/** One round trip for a maintenance tick's reads (and the reaper's write). */
export async function maintenanceSweep(db: Queryable): Promise<Sweep> {
  const r = await runPrepared<Sweep>(db, SWEEP, [WORKER_SEEN_WITHIN_MS]);
  return r.rows[0]!;
}
