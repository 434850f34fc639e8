import type { ChainEvent } from '../chain/chain-verifier.ts';

/**
 * One archived month as JSON Lines (docs/audit.md, "Archival"): a header line, then the
 * signed checkpoints that bound it — the one at its last event (required), and the previous
 * month's at the event before its first (when there is one) — then every event of the month
 * in seq order as stored (hashed fields, hash, query columns).
 */
export const ARCHIVE_KIND = 'mtg-audit-month';
export const ARCHIVE_VERSION = 1;

export interface ArchiveHeader {
  archive: typeof ARCHIVE_KIND;
  version: typeof ARCHIVE_VERSION;
  /** The partition, e.g. `events_2026_08`. */
  partition: string;
  rangeFrom: string;
  rangeTo: string;
  firstSeq: number;
  /** The hash the first event links to (the previous month's last, or GENESIS_HASH). */
  firstPrevHash: string;
  lastSeq: number;
  lastHash: string;
  events: number;
}

export type ArchiveLine =
  | ArchiveHeader
  | { event: ChainEvent }
  | { checkpoint: { seq: number; hash: string; jws: string } };
