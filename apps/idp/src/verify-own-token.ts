import { nowMs, rememberAccepted } from '@mtg/clock';
import { createLocalJWKSet, errors, jwtVerify, type JWK, type JWTPayload } from 'jose';
import { SIGNING_ALG } from './signing-key.ts';

/** The claims of an access token this IdP issued (see docs/dev-idp.md). */
export interface OwnAccessToken extends JWTPayload {
  sub: string;
  exp: number;
  iat: number;
  client_id: string;
  scope?: string;
  tenant?: string;
  act?: Actor;
}

export interface Actor {
  sub: string;
  act?: Actor;
}

export type VerifyOwnTokenResult =
  | { ok: true; claims: OwnAccessToken }
  | { ok: false; code: 'token_expired' | 'token_invalid'; message: string };

/**
 * Verifies a JWT access token issued by this IdP. JWT access tokens are not stored by
 * oidc-provider (AccessToken.find cannot see them), so the signature is the check. A token it
 * accepted is remembered (by the whole token) for a minute at most and never past its `exp`:
 * a client's actor token, sent with each of its exchanges, is checked once. Whether its
 * user is disabled is asked on every exchange, after this.
 */
export function createOwnTokenVerifier(options: {
  issuer: string;
  publicKey: JWK;
  now?: () => number;
}): (token: string) => Promise<VerifyOwnTokenResult> {
  const keys = createLocalJWKSet({ keys: [options.publicKey] });
  const now = options.now ?? nowMs;
  const verify = async (token: string): Promise<VerifyOwnTokenResult> => {
    try {
      const { payload } = await jwtVerify(token, keys, {
        issuer: options.issuer,
        algorithms: [SIGNING_ALG],
        typ: 'at+jwt',
        // jose treats a token without exp as never expiring unless exp is required.
        requiredClaims: ['exp', 'iat', 'sub', 'client_id', 'aud'],
        currentDate: new Date(now()),
      });
      return { ok: true, claims: payload as OwnAccessToken };
    } catch (error) {
      if (error instanceof errors.JWTExpired) {
        return { ok: false, code: 'token_expired', message: 'token has expired' };
      }
      if (error instanceof errors.JOSEError) {
        return { ok: false, code: 'token_invalid', message: error.message };
      }
      throw error;
    }
  };
  return rememberAccepted(verify, {
    maxAgeMs: 60_000,
    acceptedUntil: (r) => (r.ok ? r.claims.exp * 1000 : undefined),
    now,
  });
}
