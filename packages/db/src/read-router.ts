import type pg from 'pg';
import type { Pool } from './create-pool.ts';

/** Where a read ran. */
export type ReadTarget = 'primary' | 'replica';

/**
 * Why a read ran where it did (the `reason` label of `mtg_db_reads_total`):
 * - `replica`: the replica was fit (reachable, within the lag bound, past the caller's writes);
 * - `no_replica`: DATABASE_READ_URL is unset;
 * - `replica_down`: the replica failed recently (or has not been reached yet);
 * - `replica_lagging`: its staleness is past DATABASE_READ_MAX_LAG_MS, or not yet known;
 * - `own_write`: the caller wrote something the replica has not replayed yet;
 * - `replica_failed`: the read failed on the replica and was answered by the primary;
 * - `not_found`: the replica had no such row; the primary was asked (a task just created).
 */
export type ReadReason =
  | 'replica'
  | 'no_replica'
  | 'replica_down'
  | 'replica_lagging'
  | 'own_write'
  | 'replica_failed'
  | 'not_found';

export interface ReadRouterOptions {
  primary: Pool;
  /** A pool on a hot standby of `primary`; unset: every read goes to the primary. */
  replica?: Pool;
  /** The replica is used only while it is at most this stale (ms). */
  maxLagMs: number;
  /** How often the replica's replay position is compared with the primary's (ms). */
  checkIntervalMs?: number;
  /** Told about every routed read: for metrics. */
  onRead?: (target: ReadTarget, reason: ReadReason) => void;
  /** Told when the replica is found down or back (for the log). */
  onReplicaState?: (state: 'up' | 'down', error?: Error) => void;
  /** Writes remembered for read-your-writes at most (default 100 000; the oldest go first). */
  maxRemembered?: number;
}

/**
 * Routes reads to a streaming replica when that is safe, and everything else to the primary.
 *
 * Staleness is measured, not guessed: every `checkIntervalMs` the router samples the primary's
 * WAL position (`pg_current_wal_lsn()`, with the time it was taken) and the replica's replay
 * position (`pg_last_wal_replay_lsn()`). The replica is as fresh as the newest primary sample
 * it has replayed; its lag is the age of that sample. An idle primary therefore shows no lag,
 * and a replica whose stream broke shows a lag that grows until it passes the bound.
 *
 * Read-your-writes: after a write (a start, a cancel) the caller's keys are remembered with the
 * primary's WAL insert position taken after the commit; a read for those keys uses the replica
 * only once it has replayed that far, else the primary. This holds within one process; see
 * docs/scaling.md, "Read replicas", for what holds across gateway replicas.
 */
export interface ReadRouter {
  /** Whether a replica is configured at all. */
  readonly hasReplica: boolean;
  /**
   * Runs `fn` on the replica when it is fit for `keys`, else on the primary. A failure on the
   * replica (unreachable, a recovery conflict, anything) marks it down and runs `fn` again on
   * the primary, so `fn` must only read.
   */
  read<T>(
    keys: readonly string[],
    fn: (db: pg.Pool) => Promise<T>,
  ): Promise<{ value: T; target: ReadTarget }>;
  /** Runs `fn` on the primary, counted with `reason` (e.g. `not_found` after the replica). */
  onPrimary<T>(reason: ReadReason, fn: (db: pg.Pool) => Promise<T>): Promise<T>;
  /** Remembers that `keys` just wrote (after the commit), for read-your-writes. Never throws. */
  wrote(keys: readonly string[]): Promise<void>;
  /** The last measured state of the replica (for tests and the log). */
  state(): { up: boolean; lagMs: number | undefined; replayed: string | undefined };
  /** Measures the replica now (also done every checkIntervalMs). */
  check(): Promise<void>;
  close(): Promise<void>;
}

const UNKNOWN_LSN = 0xffffffffffffffffn;

/** `X/Y` (hex halves) as one number, for comparing WAL positions. */
function parseLsn(lsn: string): bigint {
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(lsn);
  if (!m) throw new Error(`not a WAL position: ${lsn}`);
  return (BigInt('0x' + m[1]) << 32n) | BigInt('0x' + m[2]);
}

export function createReadRouter(options: ReadRouterOptions): ReadRouter {
  const { primary, replica, maxLagMs } = options;
  const onRead = options.onRead ?? (() => {});
  const maxRemembered = options.maxRemembered ?? 100_000;
  const interval = options.checkIntervalMs ?? Math.max(50, Math.min(1000, maxLagMs / 4));

  // The primary's WAL position over the last moments (oldest first), and the replica's.
  const samples: Array<{ at: number; lsn: bigint }> = [];
  let replayed: bigint | undefined;
  let up = false;
  let lagMs: number | undefined;
  // Key → the primary's insert position after that key's last write (insertion-ordered).
  const writes = new Map<string, bigint>();

  const markDown = (error: Error) => {
    if (up) options.onReplicaState?.('down', error);
    up = false;
    lagMs = undefined;
  };

  const lagNow = (): number | undefined => {
    if (replayed === undefined) return undefined;
    for (let i = samples.length - 1; i >= 0; i--) {
      if (samples[i]!.lsn <= replayed) return performance.now() - samples[i]!.at;
    }
    return undefined; // behind every sample we still hold: older than the window
  };

  const readReplayed = async (): Promise<bigint> => {
    const r = await replica!.query<{ replayed: string | null; standby: boolean }>(
      'SELECT pg_last_wal_replay_lsn()::text AS replayed, pg_is_in_recovery() AS standby',
    );
    const row = r.rows[0]!;
    // A promoted replica (or a primary given as one) is no replica: its position is its own.
    if (!row.standby || !row.replayed) throw new Error('DATABASE_READ_URL is not a hot standby');
    const lsn = parseLsn(row.replayed);
    if (replayed === undefined || lsn > replayed) replayed = lsn;
    return replayed;
  };

  let checking: Promise<void> | undefined;
  const check = () =>
    (checking ??= (async () => {
      if (!replica) return;
      try {
        const p = await primary.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
        samples.push({ at: performance.now(), lsn: parseLsn(p.rows[0]!.lsn) });
        // Enough history to measure any lag up to the bound, and a little more.
        const horizon = performance.now() - maxLagMs - 2 * interval;
        while (samples.length > 2 && samples[0]!.at < horizon) samples.shift();
      } catch {
        return; // the primary's own trouble: the reads will meet it there
      }
      try {
        await readReplayed();
        if (!up) options.onReplicaState?.('up');
        up = true;
        lagMs = lagNow();
        for (const [key, lsn] of writes) if (lsn <= replayed!) writes.delete(key);
      } catch (error) {
        markDown(error as Error);
      }
    })().finally(() => {
      checking = undefined;
    }));

  const timer = replica ? setInterval(() => void check(), interval) : undefined;
  timer?.unref();
  if (replica) void check();

  const remember = (keys: readonly string[], lsn: bigint) => {
    for (const key of keys) {
      writes.delete(key); // re-inserted last: the map stays ordered by write
      writes.set(key, lsn);
    }
    while (writes.size > maxRemembered) writes.delete(writes.keys().next().value!);
  };

  // One position query serves every write noted while it was not yet sent (the settle
  // notifications of a busy cluster arrive by the hundred): a batch is sent once the one
  // before it has answered, so its answer is taken after each of its writes committed.
  let inFlight: Promise<unknown> | undefined;
  let next: Promise<bigint> | undefined;
  const positionAfter = (): Promise<bigint> =>
    (next ??= (async () => {
      await inFlight?.catch(() => {});
      const mine = next!;
      next = undefined;
      inFlight = mine;
      // Never fails the write it follows: unknown, the keys read from the primary until the
      // map forgets them.
      return primary
        .query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn')
        .then((r) => parseLsn(r.rows[0]!.lsn))
        .catch(() => UNKNOWN_LSN);
    })());

  /** Where a read for `keys` should go now, and why. */
  const choose = async (keys: readonly string[]): Promise<ReadReason> => {
    if (!replica) return 'no_replica';
    if (!up) return 'replica_down';
    const lag = lagNow();
    if (lag === undefined || lag > maxLagMs) return 'replica_lagging';
    let needed: bigint | undefined;
    for (const key of keys) {
      const lsn = writes.get(key);
      if (lsn !== undefined && (needed === undefined || lsn > needed)) needed = lsn;
    }
    if (needed === undefined || needed <= replayed!) return 'replica';
    // Only a caller that just wrote pays for this query (and only until the replica caught up).
    try {
      if ((await readReplayed()) >= needed) return 'replica';
    } catch (error) {
      markDown(error as Error);
      return 'replica_down';
    }
    return 'own_write';
  };

  return {
    hasReplica: replica !== undefined,
    async read(keys, fn) {
      const reason = await choose(keys);
      if (reason !== 'replica') {
        onRead('primary', reason);
        return { value: await fn(primary), target: 'primary' };
      }
      try {
        const value = await fn(replica!);
        onRead('replica', 'replica');
        return { value, target: 'replica' };
      } catch (error) {
        // Whatever went wrong there (gone, a recovery conflict): the primary answers instead.
        markDown(error as Error);
        onRead('primary', 'replica_failed');
        return { value: await fn(primary), target: 'primary' };
      }
    },
    async onPrimary(reason, fn) {
      onRead('primary', reason);
      return fn(primary);
    },
    async wrote(keys) {
      if (!replica || keys.length === 0) return;
      // At once, before any await: a read for these keys that comes in meanwhile goes to the
      // primary (UNKNOWN_LSN is past every position) …
      remember(keys, UNKNOWN_LSN);
      // … until the primary's position after the commit is known: at or past the commit
      // record, so a replica that replayed up to it shows the write.
      const lsn = await positionAfter();
      for (const key of keys) if (writes.get(key) === UNKNOWN_LSN) writes.set(key, lsn);
    },
    state: () => ({
      up,
      lagMs,
      replayed: replayed === undefined ? undefined : formatLsn(replayed),
    }),
    check,
    async close() {
      if (timer) clearInterval(timer);
      await checking;
    },
  };
}

function formatLsn(lsn: bigint): string {
  return `${(lsn >> 32n).toString(16).toUpperCase()}/${(lsn & 0xffffffffn).toString(16).toUpperCase()}`;
}
