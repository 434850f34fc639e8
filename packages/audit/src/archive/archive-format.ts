import type { ChainEvent } from '../chain/chain-verifier.ts';
import type { ChainHead } from '../checkpoint/sign-checkpoint.ts';

/**
 * One archived month as JSON Lines (docs/audit.md, "Archival"): a header line, then the
 * signed checkpoints that bound it — the one at the month's end, which attests the last event
 * in it of every chain (required), and the previous month's (when there is one) — then every
 * event of the month by chain, then seq, as stored (hashed fields, hash, query columns).
 */
export const ARCHIVE_KIND = 'mtg-audit-month';
export const ARCHIVE_VERSION = 2;

/** One chain's run inside the month. */
export interface ArchiveChain {
  chain: number;
  tenant: string | null;
  firstSeq: number;
  /** The hash the first event links to (the chain's previous month's last, or GENESIS_HASH). */
  firstPrevHash: string;
  lastSeq: number;
  lastHash: string;
  events: number;
}

export interface ArchiveHeader {
  archive: typeof ARCHIVE_KIND;
  version: typeof ARCHIVE_VERSION;
  /** The partition, e.g. `events_2026_08`. */
  partition: string;
  rangeFrom: string;
  rangeTo: string;
  chains: ArchiveChain[];
  events: number;
}

export type ArchiveLine =
  ArchiveHeader | { event: ChainEvent } | { checkpoint: { jws: string; heads?: ChainHead[] } };
