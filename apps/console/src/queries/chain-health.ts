import type { JSONWebKeySet } from 'jose';
import type { Pool } from '@mtg/db';
import { verifyAuditTrail, type VerifyAuditTrailReport } from '@mtg/audit';

export interface ChainHealth {
  /** The newest event of any chain, and how many chains there are. */
  head: { occurredAt: Date; chains: number } | null;
  latestCheckpoint: { heads: number; signedAt: Date; keyId: string } | null;
  /** Events, over every chain, after the latest checkpoint's heads: covered by no signature. */
  uncovered: number;
  partitions: Array<{
    partition: string;
    chains: number;
    events: number;
    /** Whether each chain in it starts where it ended the month before (seq and hash). */
    continuous: boolean;
  }>;
  /** Verification from the latest checkpoint (or the start), as of this page load. */
  verification: VerifyAuditTrailReport | { error: string };
  checkedAt: Date;
}

const MAX_EVENTS_PER_PAGE = 200_000;

/** The trail as a whole: every chain (one per tenant, and chain 0), never an event's content. */
export async function chainHealth(
  pool: Pool,
  keys: JSONWebKeySet | undefined,
  now: () => Date,
): Promise<ChainHealth> {
  const newest = (
    await pool.query<{ occurred_at: Date }>('SELECT occurred_at FROM audit.chain_head')
  ).rows[0];
  const heads = (
    await pool.query<{ chain_id: string; seq: string }>(
      'SELECT chain_id, seq FROM audit.chain_heads WHERE seq > 0',
    )
  ).rows.map((r) => ({ chain: Number(r.chain_id), seq: Number(r.seq) }));
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
  // Each chain's last run seen so far, month by month.
  const lastOf = new Map<string, { seq: number; hash: string }>();
  const partitions: ChainHealth['partitions'] = [];
  for (const b of bounds) {
    let p = partitions.at(-1);
    if (!p || p.partition !== b.partition) {
      p = { partition: b.partition, chains: 0, events: 0, continuous: true };
      partitions.push(p);
    }
    if (b.chain_id === null) continue;
    p.chains++;
    p.events += Number(b.events);
    const before = lastOf.get(b.chain_id);
    if (before && (Number(b.first_seq) !== before.seq + 1 || b.first_prev_hash !== before.hash)) {
      p.continuous = false;
    }
    lastOf.set(b.chain_id, { seq: Number(b.last_seq), hash: b.last_hash! });
  }
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
      head: newest ? { occurredAt: newest.occurred_at, chains: heads.length } : null,
      latestCheckpoint: cp
        ? { heads: covered.size, signedAt: cp.signed_at, keyId: cp.key_id }
        : null,
      uncovered,
      partitions,
      checkedAt: now(),
    };
  }
}
