import type pg from 'pg';

/**
 * Where the adversarial pass may write. Every request it makes is audited, so it appends to
 * the chain of the stack it runs against: it does so only in tenants of its own, named
 * `synthetic-<run>`, and only into the development stack's embedded database unless asked.
 */
export const SYNTHETIC_PREFIX = 'synthetic-';

export function syntheticTenants(runId: string) {
  return { main: `${SYNTHETIC_PREFIX}${runId}`, other: `${SYNTHETIC_PREFIX}${runId}-other` };
}

export type TargetCheck = { ok: true } | { ok: false; message: string };

/** The embedded database of `npm start` is a development chain; any other needs the flag. */
export function checkTarget(where: string, allowExternal: boolean): TargetCheck {
  if (where.startsWith('embedded') || allowExternal) return { ok: true };
  return {
    ok: false,
    message:
      `DATABASE_URL names ${where}, not the development stack's embedded database: the pass ` +
      'would append its synthetic events to that audit chain. Run it against a scratch stack ' +
      '(DATA_DIR=/tmp/scratch npm start, DATABASE_URL unset), or give --allow-external-database ' +
      'to write into this one anyway.',
  };
}

/**
 * How many events the trail holds, every chain together (each chain's head seq, summed: 0
 * when empty), read as the owner or the auditor. It only grows, so two readings bound what
 * was appended between them.
 */
export async function headSeq(db: pg.Client): Promise<number> {
  const r = await db.query<{ n: string }>(
    'SELECT coalesce(sum(seq), 0)::text AS n FROM audit.chain_heads',
  );
  return Number(r.rows[0]?.n ?? 0);
}

export interface RunCoverage {
  /** When the pass started and ended (UTC). */
  period: { from: string; to: string };
  /**
   * The events appended while it ran, counted over every chain: the trail's events
   * firstSeq..lastSeq in append order (empty when first > last).
   */
  chainRange: { firstSeq: number; lastSeq: number };
  syntheticTenants: string[];
  /** Of the range, how many are the pass's own and how many are other traffic meanwhile. */
  events: { synthetic: number; other: number };
}

export async function runCoverage(
  db: pg.Client,
  tenants: { main: string; other: string },
  period: { from: Date; to: Date },
  before: number,
): Promise<RunCoverage> {
  const after = await headSeq(db);
  // Each tenant has a chain of its own: the pass's events are its tenants' chains, whole.
  const r = await db.query<{ synthetic: string }>(
    `SELECT coalesce(sum(seq), 0)::text AS synthetic FROM audit.chain_heads WHERE tenant = ANY($1)`,
    [[tenants.main, tenants.other]],
  );
  const synthetic = Number(r.rows[0]!.synthetic);
  return {
    period: { from: period.from.toISOString(), to: period.to.toISOString() },
    chainRange: { firstSeq: before + 1, lastSeq: after },
    syntheticTenants: [tenants.main, tenants.other],
    events: { synthetic, other: Math.max(0, after - before - synthetic) },
  };
}

/**
 * An excerpt in append order, whatever order the checks gathered it in: by time, then seq
 * (within one chain, occurred_at never decreases along seq).
 */
export function bySeq<T extends { seq?: unknown; occurred_at?: unknown }>(rows: T[]): T[] {
  const at = (r: T) => (r.occurred_at instanceof Date ? r.occurred_at.getTime() : 0);
  return [...rows].sort((a, b) => at(a) - at(b) || Number(a.seq) - Number(b.seq));
}
