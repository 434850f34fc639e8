import { decodeProtectedHeader } from 'jose';

const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

/**
 * Only asymmetric algorithms: a verifier holds public keys only, and a symmetric alg would let
 * anyone with the public key (everyone) sign if a key resolver ever handed it over as a
 * secret. `none` and HS* are dropped even when configured.
 */
export function acceptableAlgorithms(configured: readonly string[]): string[] {
  return configured.filter((a) => a !== 'none' && !/^HS/i.test(a));
}

/**
 * The cheap checks before any signature work, shared by every JWS this project verifies
 * (access tokens, Security Event Tokens): bounded size, compact shape, a readable protected
 * header, and an algorithm on the allow-list. Callers map `problem` to their own error codes.
 */
export function screenCompactJws(
  token: unknown,
  options: { maxLength: number; algorithms: readonly string[] },
): { ok: true } | { ok: false; problem: 'shape' | 'header' | 'algorithm' } {
  if (typeof token !== 'string' || token.length > options.maxLength || !COMPACT_JWS.test(token)) {
    return { ok: false, problem: 'shape' };
  }
  let alg: unknown;
  try {
    alg = decodeProtectedHeader(token).alg;
  } catch {
    return { ok: false, problem: 'header' };
  }
  if (typeof alg !== 'string' || !options.algorithms.includes(alg)) {
    return { ok: false, problem: 'algorithm' };
  }
  return { ok: true };
}
