import { rememberAccepted } from '@mtg/clock';
import { jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';

export interface DownstreamCaller {
  sub: string;
  /** The token's `exp`, seconds since the epoch. */
  exp: number;
  act: Record<string, unknown> | null;
  client: string | null;
  scopes: string[];
}

/** How far past `exp` a token is still accepted (jwtVerify's `clockTolerance`), seconds. */
const CLOCK_TOLERANCE_S = 30;

/**
 * The downstream is its own resource server: a token must be issued by the trusted issuer
 * for this audience, unexpired, and carry the scope of the operation.
 */
export async function verifyDownstreamToken(
  token: string,
  options: { keys: JWTVerifyGetKey; issuer: string; audience: string },
): Promise<{ ok: true; caller: DownstreamCaller } | { ok: false; description: string }> {
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, options.keys, {
      issuer: options.issuer,
      audience: options.audience,
      algorithms: ['ES256', 'RS256', 'PS256', 'EdDSA'],
      requiredClaims: ['exp', 'sub'],
      clockTolerance: CLOCK_TOLERANCE_S,
    }));
  } catch (error) {
    return { ok: false, description: error instanceof Error ? error.message : 'invalid token' };
  }
  const scope = typeof payload.scope === 'string' ? payload.scope.split(' ').filter(Boolean) : [];
  const act =
    payload.act && typeof payload.act === 'object'
      ? (payload.act as Record<string, unknown>)
      : null;
  const client =
    typeof payload.client_id === 'string'
      ? payload.client_id
      : typeof payload.azp === 'string'
        ? payload.azp
        : null;
  return {
    ok: true,
    caller: { sub: String(payload.sub), exp: payload.exp!, act, client, scopes: scope },
  };
}

/**
 * verifyDownstreamToken that remembers the tokens it accepted, keyed by the whole token, for
 * at most a minute and never past their `exp` (with the check's 30 s tolerance): a task's
 * stage token, presented for each of its calls, pays the signature check once. Refusals are
 * not remembered; the scope and `act` checks run on every request as before.
 */
export function rememberingVerifier(options: {
  keys: JWTVerifyGetKey;
  issuer: string;
  audience: string;
}) {
  return rememberAccepted((token) => verifyDownstreamToken(token, options), {
    maxAgeMs: 60_000,
    acceptedUntil: (v) => (v.ok ? (v.caller.exp + CLOCK_TOLERANCE_S) * 1000 : undefined),
  });
}
