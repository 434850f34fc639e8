import type { Pool } from 'pg';
import { prepared, runPrepared } from '@mtg/db';

/** A worker that has not been seen for this long is taken for gone. */
export const WORKER_SEEN_WITHIN_MS = 15_000;

/**
 * app.workers: which live worker serves which queues. Each worker upserts its row at start
 * and every few seconds, and deletes it on a graceful stop; a killed worker's row ages out.
 * Answers the live workers as of the announcement (this one included), read in the same
 * statement: an idle worker's announcement and its peer list are one wake-up of its session,
 * not two.
 */
// The SELECT sees the table as the statement began (this worker's previous row, if any): the
// announced row comes from RETURNING instead. Prepared: an idle worker's one statement every
// 5 s, parsed and planned once per session instead of at each.
const ANNOUNCE = prepared(`WITH announced AS (
    INSERT INTO app.workers (id, queues, registry_fingerprint, wake_channel, wake_seen_at)
    VALUES ($1, $2, $3, $5, now())
    ON CONFLICT (id) DO UPDATE
      SET queues = $2, registry_fingerprint = $3, wake_channel = $5, wake_seen_at = now(),
          seen_at = now()
    RETURNING id, queues)
  SELECT id, queues FROM announced
  UNION ALL
  SELECT id, queues FROM app.workers
   WHERE id <> $1 AND seen_at > now() - $4 * interval '1 millisecond'`);

export async function announceWorker(
  pool: Pool,
  worker: {
    id: string;
    queues: string[];
    registryFingerprint: string;
    /** The channel it LISTENs on for the tasks chosen for it (worker-directory.ts), if any. */
    wakeChannel?: string;
  },
  seenWithinMs = WORKER_SEEN_WITHIN_MS,
): Promise<Array<{ id: string; queues: string[] }>> {
  const r = await runPrepared<{ id: string; queues: string[] }>(pool, ANNOUNCE, [
    worker.id,
    worker.queues,
    worker.registryFingerprint,
    seenWithinMs,
    worker.wakeChannel ?? null,
  ]);
  return r.rows;
}

/** The live workers and the queues each serves (for the workers' own wake-up agreement). */
export async function liveWorkers(
  pool: Pool,
  seenWithinMs = WORKER_SEEN_WITHIN_MS,
): Promise<Array<{ id: string; queues: string[] }>> {
  const r = await pool.query<{ id: string; queues: string[] }>(
    `SELECT id, queues FROM app.workers WHERE seen_at > now() - $1 * interval '1 millisecond'`,
    [seenWithinMs],
  );
  return r.rows;
}

export async function retireWorker(pool: Pool, id: string): Promise<void> {
  await pool.query(`DELETE FROM app.workers WHERE id = $1`, [id]);
}

/** Queued tasks per tool whose queue no live worker serves (for the gateway's gauge). */
export async function countUnservedTasks(
  pool: Pool,
  seenWithinMs = WORKER_SEEN_WITHIN_MS,
): Promise<Array<{ tool: string; count: number }>> {
  const r = await pool.query<{ tool: string; count: number }>(
    `SELECT t.tool, count(*)::int AS count FROM app.tasks t
      WHERE t.status = 'working' AND t.lease_owner IS NULL AND t.started_at IS NULL
        AND NOT EXISTS (SELECT 1 FROM app.workers w
                         WHERE t.job_queue = ANY (w.queues)
                           AND w.seen_at > now() - $1 * interval '1 millisecond')
      GROUP BY t.tool`,
    [seenWithinMs],
  );
  return r.rows;
}
