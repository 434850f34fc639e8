import { nowMs, rememberAccepted } from '@mtg/clock';
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
  const verify: TokenVerifier = (token) => verifyAccessToken(token, options);
  if (cache.maxAgeMs <= 0) return verify;
  const toleranceMs = (options.clockToleranceSec ?? 30) * 1000;
  return rememberAccepted(verify, {
    maxAgeMs: cache.maxAgeMs,
    ...(cache.maxEntries !== undefined ? { maxEntries: cache.maxEntries } : {}),
    acceptedUntil: (r) => (r.ok ? r.principal.expiresAt * 1000 + toleranceMs : undefined),
    now: options.now ?? nowMs,
  });
}
