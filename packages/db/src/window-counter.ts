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
/** One count: the row `rows` inserts (key, points, expire), or its window's next point. */
const countInto = (rows: string) => `INSERT INTO app.rate_limits AS r (key, points, expire) ${rows}
  ON CONFLICT (key) DO UPDATE SET
    points = CASE WHEN r.expire IS NULL OR r.expire <= $2 THEN 1 ELSE r.points + 1 END,
    expire = CASE WHEN r.expire IS NULL OR r.expire <= $2 THEN EXCLUDED.expire ELSE r.expire END
  RETURNING points, expire`;
const FIRST_COUNT = countInto('VALUES ($1, 1, $2::bigint + $3::bigint)');
/**
 * The count as a common table expression named `counted` (columns `points`, `expire`) over
 * parameters $1 (the row's key), $2 (now, ms) and $3 (the window, ms): a statement that
 * counts beside other work starts `WITH ${WINDOW_COUNT_CTE}` and numbers its own parameters
 * from $4 (see WindowCounter.countWithin).
 */
export const WINDOW_COUNT_CTE = `counted AS (${FIRST_COUNT})`;
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

/** A counter's part in countInTurn: its keys, its limit and its memory of refused keys. */
interface CounterTurn {
  pool: Pool;
  now(): number;
  full(key: string): string;
  points: number;
  durationMs: number;
  refusedFromMemory(full: string, at: number): WindowCount | undefined;
  countLocally(full: string, at: number): { points: number; expire: number };
  verdict(full: string, at: number, window: { points: number; expire: number }): WindowCount;
}

/** What countInTurn reads of each counter, kept out of the counter's own face. */
const turns = new WeakMap<WindowCounter, CounterTurn>();

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

  const turn: CounterTurn = {
    pool: o.pool,
    now,
    full: (key) => `${o.prefix}:${key}`,
    points: o.points,
    durationMs: o.durationMs,
    refusedFromMemory,
    countLocally,
    verdict,
  };
  const counter = Object.assign(consume, { countWithin });
  turns.set(counter, turn);
  return counter;
}

/**
 * The counts of a chain of n keys: the first as WINDOW_COUNT_CTE counts it (its key $1, now
 * $2, its window $3), and each next one (key $(3i+2), window $(3i+3)) only when the one before
 * it stayed within its limit ($(3i+1)), so a refusal stops the chain as counting them one
 * after another would. As common table expressions c0 … c(n-1), and the select of each
 * count's points and expire (p0, e0, …; null where the chain stopped).
 */
function chainParts(n: number) {
  const ctes = [`c0 AS (${FIRST_COUNT})`];
  for (let i = 1; i < n; i++) {
    const [limit, key, window] = [3 * i + 1, 3 * i + 2, 3 * i + 3];
    const rows = `SELECT $${key}, 1, $2::bigint + $${window}::bigint FROM c${i - 1} WHERE c${i - 1}.points <= $${limit}`;
    ctes.push(`c${i} AS (${countInto(rows)})`);
  }
  const columns = Array.from({ length: n }, (_, i) => [`p${i}`, `e${i}`]).flat();
  const selected = Array.from(
    { length: n },
    (_, i) => `c${i}.points AS p${i}, c${i}.expire AS e${i}`,
  );
  const joins = Array.from({ length: n - 1 }, (_, i) => ` LEFT JOIN c${i + 1} ON true`).join('');
  return {
    ctes: ctes.join(',\n'),
    columns,
    select: `SELECT ${selected.join(', ')} FROM c0${joins}`,
  };
}
const CHAINS = new Map<number, PreparedStatement>();
const chainStatement = (n: number): PreparedStatement => {
  let statement = CHAINS.get(n);
  if (!statement) {
    const c = chainParts(n);
    CHAINS.set(n, (statement = prepared(`WITH ${c.ctes}\n${c.select}`)));
  }
  return statement;
};

/**
 * A chain of counts as one common table expression, `chain`, for a statement that counts
 * beside other work (countInTurnWithin): `WITH ${sql} SELECT … FROM chain …` selects its
 * `columns` (each count's points and expire) and numbers its own parameters from
 * `firstParameter`.
 */
export interface CountChain {
  sql: string;
  name: 'chain';
  columns: readonly string[];
  firstParameter: number;
}
const countChain = (n: number): CountChain => {
  const c = chainParts(n);
  return {
    sql: `${c.ctes},\nchain AS (${c.select})`,
    name: 'chain',
    columns: c.columns,
    firstParameter: 3 * n + 1,
  };
};
/** Each caller's statements by chain length: built once, as prepared statements are. */
const BESIDE = new WeakMap<
  (chain: CountChain) => PreparedStatement,
  Map<number, PreparedStatement>
>();
const besideStatement = (statementFor: (chain: CountChain) => PreparedStatement, n: number) => {
  let byLength = BESIDE.get(statementFor);
  if (!byLength) BESIDE.set(statementFor, (byLength = new Map<number, PreparedStatement>()));
  let statement = byLength.get(n);
  if (!statement) byLength.set(n, (statement = statementFor(countChain(n))));
  return statement;
};

/** The first refusal of countInTurn: which step refused, and its verdict. */
export type TurnRefusal = { index: number; count: Extract<WindowCount, { ok: false }> };

type TurnSteps = ReadonlyArray<{ counter: WindowCounter; key: string }>;
type TurnPart = { turn: CounterTurn; full: string; at: number };

/** The steps to count in the database: those before the first one refused from memory. */
function partsOf(steps: TurnSteps): { parts: TurnPart[]; fromMemory?: TurnRefusal } {
  const parts: TurnPart[] = [];
  for (const [index, { counter, key }] of steps.entries()) {
    const turn = turns.get(counter);
    if (!turn) throw new Error('countInTurn: a counter not made by createWindowCounter');
    const at = turn.now();
    const full = turn.full(key);
    const refused = turn.refusedFromMemory(full, at);
    if (refused && !refused.ok) return { parts, fromMemory: { index, count: refused } };
    parts.push({ turn, full, at });
  }
  return { parts };
}

/** The chain's parameters $1 … $3n. */
function chainValues(parts: readonly TurnPart[]): unknown[] {
  const values: unknown[] = [parts[0]!.full, parts[0]!.at, parts[0]!.turn.durationMs];
  for (let i = 1; i < parts.length; i++)
    values.push(parts[i - 1]!.turn.points, parts[i]!.full, parts[i]!.turn.durationMs);
  return values;
}

const windowsOf = (parts: readonly TurnPart[], row: Record<string, unknown>) =>
  parts.map((_, i) =>
    row[`p${i}`] === null
      ? undefined
      : { points: Number(row[`p${i}`]), expire: Number(row[`e${i}`]) },
  );

/** The first refusal among the counted windows, else the one from memory (if any). */
function firstRefusal(
  parts: readonly TurnPart[],
  windows: ReadonlyArray<{ points: number; expire: number } | undefined>,
  fromMemory: TurnRefusal | undefined,
): TurnRefusal | undefined {
  for (const [i, p] of parts.entries()) {
    const window = windows[i];
    if (!window) break;
    const count = p.turn.verdict(p.full, p.at, window);
    if (!count.ok) return { index: i, count };
  }
  return fromMemory;
}

/**
 * Counts one for each step's key on its counter, in turn, stopping at the first refusal —
 * what calling the counters one after another does — in one round trip: a key a counter
 * refuses from memory ends the chain there (the keys before it are counted), and the others
 * are one statement (chainParts). With PostgreSQL unreachable each counts on its own, as
 * a plain count does. Answers the first refusal, or undefined when every step allowed it.
 */
export async function countInTurn(steps: TurnSteps): Promise<TurnRefusal | undefined> {
  const { parts, fromMemory } = partsOf(steps);
  if (parts.length === 0) return fromMemory;
  let windows: Array<{ points: number; expire: number } | undefined>;
  try {
    const r = await runPrepared<Record<string, number | string | null>>(
      parts[0]!.turn.pool,
      chainStatement(parts.length),
      chainValues(parts),
    );
    windows = windowsOf(parts, r.rows[0]!);
  } catch {
    windows = [];
    for (const p of parts) {
      const w = p.turn.countLocally(p.full, p.at);
      windows.push(w);
      if (w.points > p.turn.points) break;
    }
  }
  return firstRefusal(parts, windows, fromMemory);
}

/**
 * countInTurn inside the statement `statementFor` builds around the chain (a CountChain; its
 * own parameters `extra`, from the chain's firstParameter), so the counts and another lookup
 * of the same request are one round trip. Answers the first refusal and the statement's row;
 * no row when the first key is refused from memory (nothing is counted or run: the caller
 * makes its lookup alone). Unlike countInTurn, a failed statement is thrown, not counted
 * locally: the caller's other lookup failed with it. `statementFor` is called once per chain
 * length and its statement kept.
 */
export async function countInTurnWithin<R extends QueryResultRow>(
  steps: TurnSteps,
  statementFor: (chain: CountChain) => PreparedStatement,
  extra: unknown[],
): Promise<{ refusal?: TurnRefusal; row?: R }> {
  const { parts, fromMemory } = partsOf(steps);
  if (parts.length === 0) return fromMemory ? { refusal: fromMemory } : {};
  const r = await runPrepared<R>(parts[0]!.turn.pool, besideStatement(statementFor, parts.length), [
    ...chainValues(parts),
    ...extra,
  ]);
  const row = r.rows[0]!;
  const refusal = firstRefusal(parts, windowsOf(parts, row), fromMemory);
  return refusal ? { refusal, row } : { row };
}
