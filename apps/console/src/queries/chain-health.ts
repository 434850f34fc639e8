import type { JSONWebKeySet } from 'jose';
import type { Pool } from '@mtg/db';
import { verifyAuditTrail, type VerifyAuditTrailReport } from '@mtg/audit';

export interface ChainHealth {
  /** The newest event of the tenant's chain, and how many chains it has (0 or 1). */
  head: { occurredAt: Date; chains: number } | null;
  /** The latest checkpoint, and whether its heads include the tenant's chain. */
  latestCheckpoint: { heads: number; signedAt: Date; keyId: string } | null;
  /** Events of the tenant's chain after the latest checkpoint's head of it. */
  uncovered: number;
  partitions: Array<{
    partition: string;
    chains: number;
    events: number;
    /** Whether the tenant's chain starts where it ended the month before (seq and hash). */
    continuous: boolean;
  }>;
  /** Verification from the latest checkpoint (or the start), as of this page load. */
  verification: VerifyAuditTrailReport | { error: string } | { empty: true };
  checkedAt: Date;
}

const MAX_EVENTS_PER_PAGE = 200_000;

/**
 * The tenant's own chain, as its auditor may see it: its head, what the latest checkpoint
 * covers of it, its months, and its verification — never another tenant's chain, counts or
 * breakage (a broken chain of another tenant is not this tenant's news, and its size is not
 * either). Chain 0 (system events, the legacy history every tenant shared) is the operator
 * of the whole system's, with `npm run -s audit:verify`.
 */
export async function chainHealth(
  pool: Pool,
  keys: JSONWebKeySet | undefined,
  now: () => Date,
  tenant: string,
): Promise<ChainHealth> {
  const own = (
    await pool.query<{ chain_id: string; seq: string; occurred_at: Date | null }>(
      'SELECT chain_id, seq, occurred_at FROM audit.chain_heads WHERE tenant = $1 AND seq > 0',
      [tenant],
    )
  ).rows[0];
  const heads = own ? [{ chain: Number(own.chain_id), seq: Number(own.seq) }] : [];
  const cp = (
    await pool.query<{
      seq: string | null;
      heads: { chain: number; seq: number }[] | null;
      signed_at: Date;
      key_id: string;
    }>('SELECT seq, heads, signed_at, key_id FROM audit.checkpoint_log ORDER BY id DESC LIMIT 1')
  ).rows[0];
  const covered = new Map<number, number>(
    cp ? (cp.heads ?? [{ chain: 0, seq: Number(cp.seq) }]).map((h) => [h.chain, h.seq]) : [],
  );
  const uncovered = heads.reduce((n, h) => n + Math.max(0, h.seq - (covered.get(h.chain) ?? 0)), 0);
  const total = heads.reduce((n, h) => n + h.seq, 0);
  const bounds = (
    await pool.query<{
      partition: string;
      chain_id: string | null;
      events: string;
      first_seq: string | null;
      first_prev_hash: string | null;
      last_seq: string | null;
      last_hash: string | null;
    }>(
      'SELECT partition, chain_id, events, first_seq, first_prev_hash, last_seq, last_hash FROM audit.partition_bounds() ORDER BY partition, chain_id',
    )
  ).rows;
  // The chain's last run seen so far, month by month (other chains' rows: only the month).
  const lastOf = new Map<string, { seq: number; hash: string }>();
  const partitions: ChainHealth['partitions'] = [];
  for (const b of bounds) {
    let p = partitions.at(-1);
    if (!p || p.partition !== b.partition) {
      p = { partition: b.partition, chains: 0, events: 0, continuous: true };
      partitions.push(p);
    }
    if (b.chain_id === null || !own || b.chain_id !== own.chain_id) continue;
    p.chains++;
    p.events += Number(b.events);
    const before = lastOf.get(b.chain_id);
    if (before && (Number(b.first_seq) !== before.seq + 1 || b.first_prev_hash !== before.hash)) {
      p.continuous = false;
    }
    lastOf.set(b.chain_id, { seq: Number(b.last_seq), hash: b.last_hash! });
  }
  if (!own) return { ...base(), verification: { empty: true } };
  let verification: ChainHealth['verification'];
  // A page load verifies what a checkpoint does not cover yet, never a whole large trail.
  const toCheck = cp && keys ? uncovered : total;
  if (toCheck > MAX_EVENTS_PER_PAGE) {
    return {
      ...base(),
      verification: {
        error: `${toCheck} events to check from ${cp && keys ? 'the latest checkpoint' : 'the start'}, more than a page load does (${MAX_EVENTS_PER_PAGE}): run npm run -s audit:verify (and audit:checkpoint)`,
      },
    };
  }
  const client = await pool.connect();
  try {
    verification = await verifyAuditTrail(client, {
      tenant,
      ...(keys ? { keys } : {}),
      ...(cp && keys ? { fromCheckpoint: 'latest' as const } : {}),
    });
  } catch (error) {
    verification = { error: (error as Error).message };
  } finally {
    client.release();
  }
  return { ...base(), verification };

  function base() {
    return {
      head: own?.occurred_at ? { occurredAt: own.occurred_at, chains: heads.length } : null,
      latestCheckpoint: cp
        ? {
            heads: heads.filter((h) => covered.has(h.chain)).length,
            signedAt: cp.signed_at,
            keyId: cp.key_id,
          }
        : null,
      uncovered,
      partitions,
      checkedAt: now(),
    };
  }
}
