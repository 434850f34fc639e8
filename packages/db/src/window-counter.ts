import { nowMs, type Clock } from '@mtg/clock';
import type { Pool, QueryResultRow } from 'pg';
import { prepared, runPrepared, type PreparedStatement } from './prepared.ts';

export type WindowCount =
  | { ok: true }
  | {
      ok: false;
      /** The key's count in its window once this one was added; 0 when refused from memory. */
      consumed: number;
      msBeforeNext: number;
    };

export interface WindowCounterOptions {
  pool: Pool;
  /** Names the limit: a row's key is `<prefix>:<key>`. */
  prefix: string;
  /** Counts a window allows; the next one is refused. */
  points: number;
  durationMs: number;
  /** Whose time opens and closes a window (default: the system's); tests move it. */
  clock?: Clock;
}

// A key's window opens at its first count and lasts durationMs: one atomic upsert per count,
// so every replica's counts add up and exactly one of them sees points + 1. The time is the
// caller's clock, passed in, never the database's: a test moves the gateway's clock to roll a
// window over. (The rows and their layout are those of migration 020.)
/**
 * The count as a common table expression named `counted` (columns `points`, `expire`) over
 * parameters $1 (the row's key), $2 (now, ms) and $3 (the window, ms): a statement that
 * counts beside other work starts `WITH ${WINDOW_COUNT_CTE}` and numbers its own parameters
 * from $4 (see WindowCounter.countWithin).
 */
export const WINDOW_COUNT_CTE = `counted AS (
  INSERT INTO app.rate_limits AS r (key, points, expire) VALUES ($1, 1, $2::bigint + $3::bigint)
  ON CONFLICT (key) DO UPDATE SET
    points = CASE WHEN r.expire IS NULL OR r.expire <= $2 THEN 1 ELSE r.points + 1 END,
    expire = CASE WHEN r.expire IS NULL OR r.expire <= $2 THEN EXCLUDED.expire ELSE r.expire END
  RETURNING points, expire)`;
const COUNT = prepared(`WITH ${WINDOW_COUNT_CTE} SELECT points, expire FROM counted`);

/** A counter: `consume(key)` counts one for `key` and says whether the window allows it. */
export interface WindowCounter {
  (key: string): Promise<WindowCount>;
  /**
   * Counts one for `key` inside `statement` (which starts `WITH ${WINDOW_COUNT_CTE}`, selects
   * `counted.points` and `counted.expire` in its one row, and takes `extra` as $4, $5, …), so
   * a request's count and another lookup of it are one round trip. Answers the statement's
   * row with the count's verdict; when the key is refused from memory nothing is counted or
   * run (no row). Unlike a plain count, a failed statement is thrown, not counted locally:
   * the caller's other lookup failed with it.
   */
  countWithin<R extends QueryResultRow>(
    key: string,
    statement: PreparedStatement,
    extra: unknown[],
  ): Promise<{ count: WindowCount; row?: R }>;
}

/** Rows whose window ended over an hour ago go, every five minutes (the table's only purge). */
const SWEEP_EVERY_MS = 5 * 60_000;
const KEEP_ENDED_MS = 60 * 60_000;

/**
 * Fixed-window counters in app.rate_limits, shared by every replica. Once a key is over, its
 * later counts in the window are refused from memory without a database round trip (a flood
 * costs this replica, not PostgreSQL). With PostgreSQL unreachable each replica counts on its
 * own, rather than refusing everyone or no one.
 */
export function createWindowCounter(o: WindowCounterOptions): WindowCounter {
  const now = () => nowMs(o.clock);
  const blocked = new Map<string, number>();
  const local = new Map<string, { points: number; expire: number }>();
  let nextSweepAt = now() + SWEEP_EVERY_MS;

  const sweep = (at: number) => {
    nextSweepAt = at + SWEEP_EVERY_MS;
    for (const [k, until] of blocked) if (until <= at) blocked.delete(k);
    for (const [k, w] of local) if (w.expire <= at) local.delete(k);
    o.pool
      .query('DELETE FROM app.rate_limits WHERE expire < $1', [at - KEEP_ENDED_MS])
      .catch(() => {}); // the next sweep deletes them instead
  };

  const countLocally = (key: string, at: number) => {
    let w = local.get(key);
    if (!w || w.expire <= at) local.set(key, (w = { points: 0, expire: at + o.durationMs }));
    w.points++;
    return w;
  };

  // A key refused from memory until its window ends: no round trip.
  const refusedFromMemory = (full: string, at: number): WindowCount | undefined => {
    if (at >= nextSweepAt) sweep(at);
    const until = blocked.get(full);
    if (until === undefined) return undefined;
    if (until > at) return { ok: false, consumed: 0, msBeforeNext: until - at };
    blocked.delete(full);
    return undefined;
  };

  const verdict = (
    full: string,
    at: number,
    window: { points: number; expire: number },
  ): WindowCount => {
    if (window.points <= o.points) return { ok: true };
    blocked.set(full, window.expire);
    return { ok: false, consumed: window.points, msBeforeNext: Math.max(0, window.expire - at) };
  };

  const windowOf = (row: { points: number; expire: string }) => ({
    points: row.points,
    expire: Number(row.expire),
  });

  async function consume(key: string): Promise<WindowCount> {
    const at = now();
    const full = `${o.prefix}:${key}`;
    const refused = refusedFromMemory(full, at);
    if (refused) return refused;
    let window: { points: number; expire: number };
    try {
      const r = await runPrepared<{ points: number; expire: string }>(o.pool, COUNT, [
        full,
        at,
        o.durationMs,
      ]);
      window = windowOf(r.rows[0]!);
    } catch {
      window = countLocally(full, at);
    }
    return verdict(full, at, window);
  }

  async function countWithin<R extends QueryResultRow>(
    key: string,
    statement: PreparedStatement,
    extra: unknown[],
  ): Promise<{ count: WindowCount; row?: R }> {
    const at = now();
    const full = `${o.prefix}:${key}`;
    const refused = refusedFromMemory(full, at);
    if (refused) return { count: refused };
    const r = await runPrepared(o.pool, statement, [full, at, o.durationMs, ...extra]);
    const row = r.rows[0] as R & { points: number; expire: string };
    return { count: verdict(full, at, windowOf(row)), row };
  }

  return Object.assign(consume, { countWithin });
}
