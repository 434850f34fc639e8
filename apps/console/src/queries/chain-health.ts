import type { JSONWebKeySet } from 'jose';
import type { Pool } from '@mtg/db';
import { verifyAuditTrail, type VerifyAuditTrailReport } from '@mtg/audit';

export interface ChainHealth {
  head: { seq: number; occurredAt: Date } | null;
  latestCheckpoint: { seq: number; signedAt: Date; keyId: string } | null;
  /** Events after the latest checkpoint: not yet covered by any signature. */
  uncovered: number;
  partitions: Array<{
    partition: string;
    first_seq: number | null;
    last_seq: number | null;
    /** Whether it starts where the previous month ended (seq and hash). */
    continuous: boolean;
  }>;
  /** Verification from the latest checkpoint (or the start), as of this page load. */
  verification: VerifyAuditTrailReport | { error: string };
  checkedAt: Date;
}

const MAX_EVENTS_PER_PAGE = 200_000;

/** The chain as a whole (every tenant's events share one chain). */
export async function chainHealth(
  pool: Pool,
  keys: JSONWebKeySet | undefined,
  now: () => Date,
): Promise<ChainHealth> {
  const head = (
    await pool.query<{ seq: number; occurred_at: Date }>(
      'SELECT seq, occurred_at FROM audit.chain_head',
    )
  ).rows[0];
  const cp = (
    await pool.query<{ seq: number; signed_at: Date; key_id: string }>(
      'SELECT seq, signed_at, key_id FROM audit.checkpoint_log ORDER BY seq DESC, id DESC LIMIT 1',
    )
  ).rows[0];
  const bounds = (
    await pool.query<{
      partition: string;
      first_seq: number | null;
      first_prev_hash: string | null;
      last_seq: number | null;
      last_hash: string | null;
    }>(
      'SELECT partition, first_seq, first_prev_hash, last_seq, last_hash FROM audit.partition_bounds() ORDER BY partition',
    )
  ).rows;
  const stored = bounds.filter((b) => b.first_seq !== null);
  const partitions = bounds.map((b) => {
    const i = stored.indexOf(b);
    const before = i > 0 ? stored[i - 1] : undefined;
    const continuous =
      b.first_seq === null || !before
        ? true
        : b.first_seq === before.last_seq! + 1 && b.first_prev_hash === before.last_hash;
    return { partition: b.partition, first_seq: b.first_seq, last_seq: b.last_seq, continuous };
  });
  let verification: ChainHealth['verification'];
  // A page load verifies what a checkpoint does not cover yet, never a whole large trail.
  const toCheck = (head?.seq ?? 0) - (cp && keys ? cp.seq : 0);
  if (toCheck > MAX_EVENTS_PER_PAGE) {
    return {
      ...base(),
      verification: {
        error: `${toCheck} events to check from ${cp && keys ? `the checkpoint at event ${cp.seq}` : 'the start'}, more than a page load does (${MAX_EVENTS_PER_PAGE}): run npm run -s audit:verify (and audit:checkpoint)`,
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
      head: head ? { seq: head.seq, occurredAt: head.occurred_at } : null,
      latestCheckpoint: cp ? { seq: cp.seq, signedAt: cp.signed_at, keyId: cp.key_id } : null,
      uncovered: head ? head.seq - (cp?.seq ?? 0) : 0,
      partitions,
      checkedAt: now(),
    };
  }
}
