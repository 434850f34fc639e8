import { nowMs, type Clock } from '@mtg/clock';
import type { Pool } from 'pg';

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
const COUNT = `
  INSERT INTO app.rate_limits AS r (key, points, expire) VALUES ($1, 1, $2::bigint + $3::bigint)
  ON CONFLICT (key) DO UPDATE SET
    points = CASE WHEN r.expire IS NULL OR r.expire <= $2 THEN 1 ELSE r.points + 1 END,
    expire = CASE WHEN r.expire IS NULL OR r.expire <= $2 THEN EXCLUDED.expire ELSE r.expire END
  RETURNING points, expire`;

/** Rows whose window ended over an hour ago go, every five minutes (the table's only purge). */
const SWEEP_EVERY_MS = 5 * 60_000;
const KEEP_ENDED_MS = 60 * 60_000;

/**
 * Fixed-window counters in app.rate_limits, shared by every replica. Once a key is over, its
 * later counts in the window are refused from memory without a database round trip (a flood
 * costs this replica, not PostgreSQL). With PostgreSQL unreachable each replica counts on its
 * own, rather than refusing everyone or no one.
 */
export function createWindowCounter(o: WindowCounterOptions) {
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

  return async function consume(key: string): Promise<WindowCount> {
    const at = now();
    if (at >= nextSweepAt) sweep(at);
    const full = `${o.prefix}:${key}`;
    const until = blocked.get(full);
    if (until !== undefined) {
      if (until > at) return { ok: false, consumed: 0, msBeforeNext: until - at };
      blocked.delete(full);
    }
    let window: { points: number; expire: number };
    try {
      const r = await o.pool.query<{ points: number; expire: string }>(COUNT, [
        full,
        at,
        o.durationMs,
      ]);
      window = { points: r.rows[0]!.points, expire: Number(r.rows[0]!.expire) };
    } catch {
      window = countLocally(full, at);
    }
    if (window.points <= o.points) return { ok: true };
    blocked.set(full, window.expire);
    return {
      ok: false,
      consumed: window.points,
      msBeforeNext: Math.max(0, window.expire - at),
    };
  };
}
