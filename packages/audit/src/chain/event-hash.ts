import { hash } from 'node:crypto';

/**
 * The chain's canonical form (docs/audit.md, "The hash chain"). Glossary:
 * - **event**: one row of audit.events; `body` is the canonical JSON text the writer gave.
 * - **chain**: the run of events one lock orders: chain 0 for events without a tenant (and
 *   the history written before there were chains), one per tenant otherwise.
 * - **hash input**: `chain LF seq LF occurredAt LF type LF prevHash LF body`, UTF-8, no
 *   trailing LF; for the legacy segment of chain 0 (written before migration 080), the same
 *   without the chain line.
 * - **hash**: lowercase hex SHA-256 of the hash input.
 * - **prevHash**: the previous event's hash; for seq 1, GENESIS_HASH.
 * - **anchor**: the (seq, hash) verification starts from: seq 0 and GENESIS_HASH, or a
 *   signed checkpoint.
 */
export const GENESIS_HASH = '0'.repeat(64);

/** The fields the hash covers, as stored. `occurredAt` is already in canonical form. */
export interface HashedFields {
  /** The chain id, covered by the hash; absent for an event of chain 0's legacy segment. */
  chain?: number | undefined;
  seq: number;
  /** UTC, `YYYY-MM-DDTHH:MM:SS.ffffffZ`, always six fractional digits. */
  occurredAt: string;
  type: string;
  prevHash: string;
  body: string;
}

export function hashInput(e: HashedFields): string {
  if (e.chain !== undefined) {
    return `${e.chain}\n${e.seq}\n${e.occurredAt}\n${e.type}\n${e.prevHash}\n${e.body}`;
  }
  return `${e.seq}\n${e.occurredAt}\n${e.type}\n${e.prevHash}\n${e.body}`;
}

export function eventHash(e: HashedFields): string {
  return hash('sha256', hashInput(e), 'hex');
}

const PG_UTC = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(?:\.(\d{1,6}))?\+00$/;

/**
 * PostgreSQL's text form of a timestamptz in a session with TimeZone UTC and DateStyle ISO
 * (`2026-11-29 19:41:28.1234+00`: trailing zeros of the fraction dropped) to the canonical
 * form (`2026-11-29T19:41:28.123400Z`).
 */
export function canonicalTimestamp(pgText: string): string {
  const m = PG_UTC.exec(pgText);
  if (!m) throw new TypeError(`canonicalTimestamp: not a UTC ISO timestamp: ${pgText}`);
  return `${m[1]}T${m[2]}.${(m[3] ?? '').padEnd(6, '0')}Z`;
}
