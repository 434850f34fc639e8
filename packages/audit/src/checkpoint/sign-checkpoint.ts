import { createHash } from 'node:crypto';
import { CompactSign } from 'jose';
import { canonicalJson } from '../canonical-json.ts';
import { CHECKPOINT_ALG, type SigningKey } from './signing-key.ts';

/** JWS `typ` of a checkpoint, so no other JWS signed with the key passes for one. */
export const CHECKPOINT_TYP = 'mtg-audit-checkpoint';

/** One chain's head as a checkpoint attests it: the chain passed through (seq, hash). */
export interface ChainHead {
  chain: number;
  seq: number;
  hash: string;
}

/**
 * What a checkpoint signs: every chain head at one time, as the SHA-256 over their text
 * (headsText()), their number, and chain 0's legacy boundary. The heads themselves travel
 * next to the JWS (audit.checkpoints.heads, a bundle's checkpoint), so a tenant's evidence
 * proves its own head against the signature without any other tenant's events.
 */
export interface CheckpointPayload {
  chains: number;
  headsHash: string;
  /** Chain 0's last event hashed without a chain line (docs/audit.md, "Chains"). */
  legacyUntil: number;
  /** When it was signed, ISO 8601 UTC (milliseconds). */
  signedAt: string;
}

/**
 * A checkpoint whose signature verified, with the heads it covers. `format` 1 is a checkpoint
 * signed before there were chains: `{seq, hash, occurredAt, signedAt}` of one event, which
 * is chain 0's (its legacy segment); its one head is that event.
 */
export interface SignedCheckpoint {
  format: 1 | 2;
  heads: ChainHead[];
  /** Format 2: the signed boundary of chain 0's legacy segment. */
  legacyUntil?: number;
  headsHash?: string;
  signedAt: string;
  keyId: string;
  /** Compact JWS: protected header {alg: EdDSA, kid, typ}, payload the canonical JSON. */
  jws: string;
}

/** The signed text of a list of heads: "chain seq hash" LF per head, sorted by chain. */
export function headsText(heads: readonly ChainHead[]): string {
  return [...heads]
    .sort((a, b) => a.chain - b.chain)
    .map((h) => `${h.chain} ${h.seq} ${h.hash}\n`)
    .join('');
}

export function headsHash(heads: readonly ChainHead[]): string {
  return createHash('sha256').update(headsText(heads), 'utf8').digest('hex');
}

/** The head of `chain` in a checkpoint, if it covers that chain. */
export function headOf(c: Pick<SignedCheckpoint, 'heads'>, chain: number): ChainHead | undefined {
  return c.heads.find((h) => h.chain === chain);
}

export async function signCheckpoint(
  heads: readonly ChainHead[],
  legacyUntil: number,
  key: SigningKey,
  now: Date,
): Promise<SignedCheckpoint> {
  const sorted = [...heads].sort((a, b) => a.chain - b.chain);
  const payload: CheckpointPayload = {
    chains: sorted.length,
    headsHash: headsHash(sorted),
    legacyUntil,
    signedAt: now.toISOString(),
  };
  const jws = await new CompactSign(new TextEncoder().encode(canonicalJson(payload)))
    .setProtectedHeader({ alg: CHECKPOINT_ALG, kid: key.keyId, typ: CHECKPOINT_TYP })
    .sign(key.privateKey);
  return {
    format: 2,
    heads: sorted,
    legacyUntil,
    headsHash: payload.headsHash,
    signedAt: payload.signedAt,
    keyId: key.keyId,
    jws,
  };
}
