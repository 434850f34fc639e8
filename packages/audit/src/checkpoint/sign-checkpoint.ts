import { CompactSign } from 'jose';
import { canonicalJson } from '../canonical-json.ts';
import { CHECKPOINT_ALG, type SigningKey } from './signing-key.ts';

/** JWS `typ` of a checkpoint, so no other JWS signed with the key passes for one. */
export const CHECKPOINT_TYP = 'mtg-audit-checkpoint';

/** What a checkpoint signs: the chain passed through event `seq` with `hash`. */
export interface CheckpointPayload {
  seq: number;
  hash: string;
  /** The event's occurred_at, canonical form. */
  occurredAt: string;
  /** When it was signed, ISO 8601 UTC (milliseconds). */
  signedAt: string;
}

export interface SignedCheckpoint extends CheckpointPayload {
  keyId: string;
  /** Compact JWS: protected header {alg: EdDSA, kid, typ}, payload the canonical JSON above. */
  jws: string;
}

export async function signCheckpoint(
  event: { seq: number; hash: string; occurredAt: string },
  key: SigningKey,
  now: Date,
): Promise<SignedCheckpoint> {
  const payload: CheckpointPayload = {
    seq: event.seq,
    hash: event.hash,
    occurredAt: event.occurredAt,
    signedAt: now.toISOString(),
  };
  const jws = await new CompactSign(new TextEncoder().encode(canonicalJson(payload)))
    .setProtectedHeader({ alg: CHECKPOINT_ALG, kid: key.keyId, typ: CHECKPOINT_TYP })
    .sign(key.privateKey);
  return { ...payload, keyId: key.keyId, jws };
}
