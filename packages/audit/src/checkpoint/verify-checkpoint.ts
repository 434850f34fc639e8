import { compactVerify, createLocalJWKSet, type JSONWebKeySet } from 'jose';
import { CHECKPOINT_ALG } from './signing-key.ts';
import { CHECKPOINT_TYP, type SignedCheckpoint } from './sign-checkpoint.ts';

/**
 * - `malformed`: not a compact JWS, wrong `typ`/`alg`, or a payload that is not a checkpoint;
 * - `unknown_key`: its `kid` is in none of the verifier's public keys;
 * - `bad_signature`: the signature does not verify with the key its `kid` names.
 */
export type CheckpointProblemCode = 'malformed' | 'unknown_key' | 'bad_signature';

export type CheckpointVerification =
  | { ok: true; checkpoint: SignedCheckpoint }
  | { ok: false; code: CheckpointProblemCode; message: string };

const HASH = /^[0-9a-f]{64}$/;
const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

/** A checkpoint verifier over a set of public keys (a JWKS: every key ever used to sign). */
export function createCheckpointVerifier(keys: JSONWebKeySet) {
  const jwks = createLocalJWKSet(keys);
  return async function verifyCheckpoint(jws: string): Promise<CheckpointVerification> {
    let verified;
    try {
      verified = await compactVerify(jws, jwks, { algorithms: [CHECKPOINT_ALG] });
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code === 'ERR_JWKS_NO_MATCHING_KEY') {
        return {
          ok: false,
          code: 'unknown_key',
          message: 'signed with a key that is not in the public keys given',
        };
      }
      if (code === 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED') {
        return { ok: false, code: 'bad_signature', message: 'the signature does not verify' };
      }
      return {
        ok: false,
        code: 'malformed',
        message: `not a valid checkpoint JWS (${(error as Error).message})`,
      };
    }
    const { protectedHeader: header, payload: bytes } = verified;
    if (header.typ !== CHECKPOINT_TYP || typeof header.kid !== 'string') {
      return {
        ok: false,
        code: 'malformed',
        message: `a JWS that is not a checkpoint (typ ${String(header.typ)})`,
      };
    }
    let p: Record<string, unknown>;
    try {
      p = JSON.parse(new TextDecoder().decode(bytes)) as Record<string, unknown>;
    } catch {
      return { ok: false, code: 'malformed', message: 'its payload is not JSON' };
    }
    if (
      !Number.isSafeInteger(p.seq) ||
      (p.seq as number) < 1 ||
      typeof p.hash !== 'string' ||
      !HASH.test(p.hash) ||
      typeof p.occurredAt !== 'string' ||
      !TIME.test(p.occurredAt) ||
      typeof p.signedAt !== 'string' ||
      !TIME.test(p.signedAt)
    ) {
      return {
        ok: false,
        code: 'malformed',
        message: 'its payload is not {seq, hash, occurredAt, signedAt}',
      };
    }
    return {
      ok: true,
      checkpoint: {
        seq: p.seq as number,
        hash: p.hash,
        occurredAt: p.occurredAt,
        signedAt: p.signedAt,
        keyId: header.kid,
        jws,
      },
    };
  };
}
