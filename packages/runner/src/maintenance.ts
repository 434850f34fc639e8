import { nowMs, type Clock } from '@mtg/clock';
import type { Pool, PoolClient } from 'pg';
import type { PgBoss } from 'pg-boss';
import type { Logger } from '@mtg/log';
import {
  CHANNELS,
  expireTask,
  maintenanceSweep,
  purgeExpired,
  signalDeadline,
  SUPERVISE_SECONDS,
  type OnTaskEnded,
  type Sweep,
} from '@mtg/tasks';

/**
 * The view whose EXCLUSIVE lock makes its holder the maintenance leader (migration 220). The
 * leader holds it in a transaction left open on a connection of its own; the others wait for
 * it with `LOCK TABLE`. Neither holds PostgreSQL's cleanup horizon back: a LOCK takes no
 * snapshot, and a transaction that has only taken a lock has no xid. (The earlier wait in
 * `SELECT pg_advisory_lock(…)` held a snapshot for the whole wait: with followers waiting in
 * turn, no dead row version in the database could be pruned or vacuumed.)
 */
export const MAINTENANCE_LEADER_VIEW = 'app.maintenance_leader';

/**
 * How long a follower's wait for the leader lock lasts before it is asked again. It bounds
 * how long the backend of a follower that stopped or died goes on waiting (its client is
 * gone; it notices when the wait ends), and so how long that backend keeps a connection slot.
 * Each wait wakes its backend twice (its deadlock check after `deadlock_timeout`, 1 s by
 * default, and its end), about 2.5 ms of CPU on a 2-core virtual machine: every 10 s, that was
 * a quarter of an idle follower's cost to the database.
 */
export const LEADER_WAIT_MS = 30_000;

/**
 * Takes the lead in one round trip, waiting up to `waitMs` (0: not at all). The transaction
 * stays open while this session leads: `idle_in_transaction_session_timeout`, should the
 * server set one, is off for it alone.
 */
const takeLead = (waitMs: number) =>
  `BEGIN; SET LOCAL idle_in_transaction_session_timeout = 0; ` +
  `SET LOCAL lock_timeout = ${Math.max(1, Math.round(waitMs))}; ` +
  `LOCK TABLE ${MAINTENANCE_LEADER_VIEW} IN EXCLUSIVE MODE${waitMs > 0 ? '' : ' NOWAIT'}`;

/** The wait ended without the lock: its bound (lock_timeout), NOWAIT, or a statement_timeout. */
const waitedOut = (error: unknown) => {
  const code = (error as { code?: unknown })?.code;
  return code === '55P03' || code === '57014';
};

/** Asks for the lead on `client`: true when it holds it; else its transaction is ended. */
async function askLead(client: PoolClient, waitMs: number): Promise<boolean> {
  try {
    await client.query(takeLead(waitMs));
    return true;
  } catch (error) {
    if (!waitedOut(error)) throw error; // the caller drops the connection
    await client.query('ROLLBACK');
    return false;
  }
}

/**
 * Housekeeping, run by one worker at a time — the leader, which holds the lock of
 * MAINTENANCE_LEADER_VIEW on a connection of its own. Once started, the others wait for that
 * lock in PostgreSQL (one round trip, blocked up to LEADER_WAIT_MS, then asked again), so an
 * idle follower costs the database one round trip per wait, and a leader that dies frees the
 * lock with its connection, to be taken by a waiting follower at once. (They used to ask once a tick: on
 * this kind of machine a backend woken after a second idle costs about 1.5 ms of CPU, so ten
 * asks were most of an idle worker's cost to the database.) The leader:
 * - lease reaper: a task whose lease expired (its worker died) has its job failed so pg-boss
 *   retries it at once elsewhere — failover in about leaseMs + the tick, not the 10 s+
 *   pg-boss heartbeat;
 * - deadline sweep: tasks past their deadline stop — the running worker is told, and a task
 *   nobody runs is settled as failed here;
 * - re-announce: queues with jobs not fetched — created over a second ago (a missed
 *   notification, a worker that was full) or a retry come due (pg-boss notifies none) — are
 *   notified again, to every worker with room, which is what lets the workers do without a
 *   tight poll;
 * - pg-boss supervision (job expiry, lapsed heartbeats, its own retention, the cached queue
 *   counts), every superviseEveryMs (SUPERVISE_SECONDS);
 * - retention purge: ended tasks past their retention, and expired results, are deleted.
 * Every part is idempotent: two leaders for a moment (a lock lost with its connection) are
 * harmless.
 */
export function createMaintenance(o: {
  pool: Pool;
  boss: PgBoss;
  logger: Logger;
  tickMs: number;
  purgeEveryMs: number;
  /** How long a started follower's wait for the leader lock lasts (default LEADER_WAIT_MS). */
  leaderWaitMs?: number;
  /** How often the leader runs a pg-boss supervise pass (default SUPERVISE_SECONDS). */
  superviseEveryMs?: number;
  /** Told about each task the deadline sweep ends. */
  onTaskEnded?: OnTaskEnded;
  /**
   * Paces the purge (default: the system clock). Which rows are due is the database's
   * now(), as everywhere a row's time is compared (docs/architecture.md, "Time").
   */
  clock?: Clock;
}) {
  const now = () => nowMs(o.clock);
  let timer: NodeJS.Timeout | undefined;
  let lastPurge = 0;
  let lastSupervise = 0;
  let supervising: Promise<void> | undefined;
  let busy = false;
  let stopped = false;
  let started = false;
  let leader: PoolClient | undefined;
  /** A follower's wait for the lock in flight, on its connection (started instances only). */
  let waiter: PoolClient | undefined;
  /** A wait (with its connection) is being taken or held: at most one at a time. */
  let campaigning = false;

  const becomeLeader = (client: PoolClient) => {
    // A lost connection loses the lock: stop leading, let the next tick try again.
    client.on('error', () => abdicate(true));
    leader = client;
    o.logger.info('maintenance leader');
  };

  /**
   * A started follower waits for the lock in the background, again each time a wait ends at
   * its bound; the ticks meanwhile do nothing. With the lock it runs a tick at once. stop()
   * drops the waiting connection.
   */
  const waitForLead = async () => {
    const client = await o.pool.connect();
    waiter = client;
    try {
      // A first ask without waiting: it also loads the catalog entries the wait looks up, so
      // the waits after it take no catalog snapshot either (one would hold the horizon back).
      let wait = 0;
      while (!stopped) {
        let led: boolean;
        try {
          led = await askLead(client, wait);
        } catch (error) {
          if (waiter !== client) return; // stop() dropped it
          throw error;
        }
        if (waiter !== client) return; // stop() dropped it: the lock went with the connection
        wait = o.leaderWaitMs ?? LEADER_WAIT_MS;
        if (!led) continue;
        waiter = undefined;
        becomeLeader(client);
        void tick();
        return;
      }
    } catch (error) {
      waiter = undefined;
      client.release(error as Error);
      throw error;
    }
    // Stopped between two waits.
    if (waiter === client) {
      waiter = undefined;
      client.release();
    }
  };

  /** Leads, or tries to: true while this process holds the leader lock. */
  const lead = async (): Promise<boolean> => {
    if (leader) return true;
    if (started) {
      if (!campaigning && !stopped) {
        campaigning = true;
        waitForLead()
          .catch((error: Error) => {
            o.logger.warn('maintenance leader wait failed', { error: error.message });
          })
          .finally(() => {
            campaigning = false;
          });
      }
      return false;
    }
    // Not started (ticks called by hand): one try, no wait.
    const client = await o.pool.connect();
    try {
      if (!(await askLead(client, 0))) {
        client.release();
        return false;
      }
      // Stopped while the lock was asked for: a leader now would hold its connection past
      // stop(), and the pool's end() would wait for it for ever.
      if (stopped) {
        await client.query('ROLLBACK');
        client.release();
        return false;
      }
    } catch (error) {
      client.release(error as Error);
      throw error;
    }
    becomeLeader(client);
    return true;
  };
  const abdicate = (broken = false) => {
    const client = leader;
    leader = undefined;
    if (!client) return;
    if (broken) return client.release(true);
    client
      .query('ROLLBACK') // ends the transaction that holds the lock
      .then(() => client.release())
      .catch((error: Error) => client.release(error));
  };

  const reannounce = async (unclaimed: string[]) => {
    for (const queue of unclaimed) {
      // `again`: every worker with room looks, not one chosen worker (which may be the one
      // that died): rare, since only work nobody fetched is announced again.
      await o.pool.query('SELECT pg_notify($1, $2)', [
        CHANNELS.created,
        JSON.stringify({ queue, again: true }),
      ]);
    }
  };

  const reapLeases = async (reaped: Sweep['reaped']) => {
    for (const t of reaped) {
      if (t.job_id)
        await o.boss.fail(t.job_queue, t.job_id, { reason: 'lease expired' }).catch(() => {});
      o.logger.info('reaped expired lease', { taskId: t.id });
    }
  };

  const sweepDeadlines = async (late: Sweep['late']) => {
    for (const t of late) {
      if (t.live) {
        await signalDeadline(o.pool, t.id);
        continue;
      }
      await expireTask(
        { pool: o.pool, ...(o.onTaskEnded ? { onTaskEnded: o.onTaskEnded } : {}) },
        t.id,
        t.waiting
          ? `Deadline exceeded before the task could finish: it was ${t.waiting}, and none came`
          : 'Deadline exceeded before the task could finish; it was stopped',
      );
    }
  };

  const tick = async () => {
    if (busy || stopped) return;
    busy = true;
    try {
      if (!(await lead())) return;
      const sweep = await maintenanceSweep(o.pool);
      await reapLeases(sweep.reaped);
      await sweepDeadlines(sweep.late);
      await reannounce(sweep.unclaimed);
      if (
        !supervising &&
        now() - lastSupervise >= (o.superviseEveryMs ?? SUPERVISE_SECONDS * 1000)
      ) {
        lastSupervise = now();
        // Its own lane: a slow pg-boss pass (a reindex, a vacuum check) never delays the
        // lease reaper or the deadline sweep.
        supervising = o.boss
          .supervise()
          .catch((error: Error) => {
            o.logger.warn('pg-boss supervision failed', { error: error.message });
          })
          .finally(() => {
            supervising = undefined;
          });
      }
      if (now() - lastPurge >= o.purgeEveryMs) {
        lastPurge = now();
        await purgeExpired(o.pool);
      }
    } catch (error) {
      o.logger.warn('maintenance tick failed', {
        error: error instanceof Error ? error.message : String(error),
      });
    } finally {
      busy = false;
    }
  };

  return {
    start() {
      started = true;
      timer = setInterval(() => void tick(), o.tickMs);
      timer.unref();
    },
    stop() {
      stopped = true;
      clearInterval(timer);
      abdicate();
      // Its backend ends when the wait does (LEADER_WAIT_MS at most); the pool's end() does
      // not wait for a connection dropped here.
      const client = waiter;
      waiter = undefined;
      client?.release(true);
    },
    tick,
    /** Whether this process leads maintenance now. */
    leading: () => leader !== undefined,
  };
}
