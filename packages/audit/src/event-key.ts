import { randomBytes } from 'node:crypto';
import { nowMs } from '@mtg/clock';

/**
 * A new audit event key: a UUIDv7 (RFC 9562) — 48 bits of Unix milliseconds, then random
 * bits. Time-ordered, so the keys of `audit.events` (migration 140) are inserted at the
 * right edge of their index, as the events themselves are, instead of all over it.
 */
export function newEventKey(now: number = nowMs()): string {
  const b = randomBytes(16);
  b.writeUIntBE(now, 0, 6);
  b[6] = 0x70 | (b[6]! & 0x0f); // version 7
  b[8] = 0x80 | (b[8]! & 0x3f); // variant 10
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
