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

/** The chain's head seq (0 when empty), read as the owner or the auditor. */
export async function headSeq(db: pg.Client): Promise<number> {
  const r = await db.query<{ seq: string }>('SELECT seq::text AS seq FROM audit.chain_head');
  return Number(r.rows[0]?.seq ?? 0);
}

export interface RunCoverage {
  /** When the pass started and ended (UTC). */
  period: { from: string; to: string };
  /** The events appended while it ran: seq firstSeq..lastSeq (empty when first > last). */
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
  const r = await db.query<{ synthetic: string; total: string }>(
    `SELECT count(*) FILTER (WHERE tenant = ANY($3))::text AS synthetic, count(*)::text AS total
       FROM audit.events WHERE seq > $1 AND seq <= $2`,
    [before, after, [tenants.main, tenants.other]],
  );
  const synthetic = Number(r.rows[0]!.synthetic);
  return {
    period: { from: period.from.toISOString(), to: period.to.toISOString() },
    chainRange: { firstSeq: before + 1, lastSeq: after },
    syntheticTenants: [tenants.main, tenants.other],
    events: { synthetic, other: Number(r.rows[0]!.total) - synthetic },
  };
}

/** An excerpt in chain order, whatever order the checks gathered it in. */
export function bySeq<T extends { seq?: unknown }>(rows: T[]): T[] {
  return [...rows].sort((a, b) => Number(a.seq) - Number(b.seq));
}
