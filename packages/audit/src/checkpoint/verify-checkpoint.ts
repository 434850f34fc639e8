import { compactVerify, createLocalJWKSet, type JSONWebKeySet } from 'jose';
import { CHECKPOINT_ALG } from './signing-key.ts';
import {
  CHECKPOINT_TYP,
  headsHash,
  type ChainHead,
  type SignedCheckpoint,
} from './sign-checkpoint.ts';

/**
 * - `malformed`: not a compact JWS, wrong `typ`/`alg`, or a payload that is not a checkpoint;
 * - `unknown_key`: its `kid` is in none of the verifier's public keys;
 * - `bad_signature`: the signature does not verify with the key its `kid` names;
 * - `heads_mismatch`: the list of chain heads given with it is not the one it signed.
 */
export type CheckpointProblemCode =
  'malformed' | 'unknown_key' | 'bad_signature' | 'heads_mismatch';

export type CheckpointVerification =
  | { ok: true; checkpoint: SignedCheckpoint }
  | { ok: false; code: CheckpointProblemCode; message: string };

const HASH = /^[0-9a-f]{64}$/;
const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

/** A checkpoint verifier over a set of public keys (a JWKS: every key ever used to sign). */
export function createCheckpointVerifier(keys: JSONWebKeySet) {
  const jwks = createLocalJWKSet(keys);
  /**
   * `heads`: the chain heads stored or shipped with the JWS (a format 2 checkpoint signs only
   * their hash). Without them, a format 2 checkpoint cannot be used and is `malformed`.
   */
  return async function verifyCheckpoint(
    jws: string,
    heads?: readonly ChainHead[],
  ): Promise<CheckpointVerification> {
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
    if (typeof p.headsHash === 'string') return checkHeads(p, header.kid, jws, heads);
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
        message:
          'its payload is not {chains, headsHash, legacyUntil, signedAt} nor {seq, hash, occurredAt, signedAt}',
      };
    }
    // Signed before there were chains: one event of the single chain, now chain 0.
    return {
      ok: true,
      checkpoint: {
        format: 1,
        heads: [{ chain: 0, seq: p.seq as number, hash: p.hash }],
        signedAt: p.signedAt,
        keyId: header.kid,
        jws,
      },
    };
  };
}

function checkHeads(
  p: Record<string, unknown>,
  keyId: string,
  jws: string,
  heads: readonly ChainHead[] | undefined,
): CheckpointVerification {
  if (
    !HASH.test(p.headsHash as string) ||
    !Number.isSafeInteger(p.chains) ||
    (p.chains as number) < 1 ||
    !Number.isSafeInteger(p.legacyUntil) ||
    (p.legacyUntil as number) < 0 ||
    typeof p.signedAt !== 'string' ||
    !TIME.test(p.signedAt)
  ) {
    return {
      ok: false,
      code: 'malformed',
      message: 'its payload is not {chains, headsHash, legacyUntil, signedAt}',
    };
  }
  if (!heads) {
    return {
      ok: false,
      code: 'malformed',
      message: 'it signs chain heads, but no list of heads came with it',
    };
  }
  if (!heads.every(isHead) || new Set(heads.map((h) => h.chain)).size !== heads.length) {
    return {
      ok: false,
      code: 'malformed',
      message: 'its list of heads is not [{chain, seq, hash}]',
    };
  }
  if (heads.length !== p.chains || headsHash(heads) !== p.headsHash) {
    return {
      ok: false,
      code: 'heads_mismatch',
      message: `the ${heads.length} chain heads given with it are not the ${String(p.chains)} it signed (hash ${headsHash(heads)}, signed ${String(p.headsHash)})`,
    };
  }
  return {
    ok: true,
    checkpoint: {
      format: 2,
      heads: [...heads].sort((a, b) => a.chain - b.chain),
      legacyUntil: p.legacyUntil as number,
      headsHash: p.headsHash,
      signedAt: p.signedAt,
      keyId,
      jws,
    },
  };
}

function isHead(h: unknown): h is ChainHead {
  if (!h || typeof h !== 'object') return false;
  const { chain, seq, hash } = h as Record<string, unknown>;
  return (
    Number.isSafeInteger(chain) &&
    (chain as number) >= 0 &&
    Number.isSafeInteger(seq) &&
    (seq as number) >= 1 &&
    typeof hash === 'string' &&
    HASH.test(hash)
  );
}
