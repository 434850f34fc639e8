import { nowMs } from '@mtg/clock';
import {
  verifyAccessToken,
  type VerifyAccessTokenOptions,
  type VerifyAccessTokenResult,
} from './verify-access-token.ts';

export interface CachedVerifierOptions {
  /**
   * How long a verified token is taken on trust without checking its signature again; 0
   * verifies every time. Bounds how long a key the issuer withdrew still verifies a token it
   * signed before (the token's own `exp` bounds it too).
   */
  maxAgeMs: number;
  /** Tokens remembered at most; the oldest is forgotten first. */
  maxEntries?: number;
}

/** A verifier for one set of options (issuer, audience, keys, claim mapping). */
export type TokenVerifier = (token: string) => Promise<VerifyAccessTokenResult>;

/**
 * verifyAccessToken that remembers the tokens it accepted (keyed by the whole token, so only
 * the very same token can hit), for at most `maxAgeMs` and never past the token's `exp` (with
 * the same clock tolerance as the check): a client polling with one token pays the signature
 * check once, not on every request. Refusals are never remembered. What a request checks
 * beyond the token (revocation, scopes, the task's owner) is untouched by this.
 */
export function cachedTokenVerifier(
  options: VerifyAccessTokenOptions,
  cache: CachedVerifierOptions,
): TokenVerifier {
  if (cache.maxAgeMs <= 0) return (token) => verifyAccessToken(token, options);
  const max = cache.maxEntries ?? 10_000;
  const now = options.now ?? nowMs;
  const toleranceMs = (options.clockToleranceSec ?? 30) * 1000;
  const accepted = new Map<string, { until: number; result: VerifyAccessTokenResult }>();
  return async (token) => {
    const t = now();
    const hit = accepted.get(token);
    if (hit) {
      if (t < hit.until) return hit.result;
      accepted.delete(token);
    }
    const result = await verifyAccessToken(token, options);
    if (result.ok) {
      const until = Math.min(t + cache.maxAgeMs, result.principal.expiresAt * 1000 + toleranceMs);
      if (accepted.size >= max) accepted.delete(accepted.keys().next().value!);
      accepted.set(token, { until, result });
    }
    return result;
  };
}
