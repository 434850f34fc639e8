import { nowMs } from '@mtg/clock';
import {
  errors,
  jwtVerify,
  type JWTPayload,
  type JWTVerifyGetKey,
  type JWTVerifyOptions,
} from 'jose';
import { mapClaims, type ClaimMapping } from './claim-mapping.ts';
import { KeysUnavailableError, type KeySource } from './create-key-source.ts';
import type { Actor, Principal } from './principal.ts';

/** Why a token was refused. Stable: audited, and mapped to HTTP in one place by the caller. */
import { acceptableAlgorithms, screenCompactJws } from './screen-compact-jws.ts';

const UNSTORABLE_TEXT =
  // eslint-disable-next-line no-control-regex -- NUL is what PostgreSQL text cannot store
  /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export type TokenErrorCode =
  | 'malformed'
  | 'alg_not_allowed'
  | 'unknown_key'
  | 'bad_signature'
  | 'expired'
  | 'not_yet_valid'
  | 'issuer_mismatch'
  | 'audience_mismatch'
  | 'claim_missing'
  | 'type_mismatch'
  | 'keys_unavailable';

export type VerifyAccessTokenResult =
  | { ok: true; principal: Principal; claims: JWTPayload }
  | { ok: false; code: TokenErrorCode; description: string };

/** A key source, or any jose key resolver (`keySource.getKey`, `createLocalJWKSet(...)`). */
export type KeyResolver = Pick<KeySource, 'getKey'> | JWTVerifyGetKey;

export type VerifyAccessTokenOptions = {
  keys: KeyResolver;
  /** Exact match. Several only when one key source serves them all (Entra v1 and v2). */
  issuer: string | string[];
  /** The token's `aud` must contain this (or one of these): RFC 8707, this server. */
  audience: string | string[];
  /** Allow-list; `none` and HS* are refused whatever it says. */
  algorithms?: readonly string[];
  clockToleranceSec?: number;
  /** RFC 9068 `typ`; `at+jwt` also accepts `application/at+jwt`. */
  requiredTyp?: 'at+jwt';
  claims: ClaimMapping;
  /** Epoch milliseconds. */
  now?: () => number;
};

/** Short name used by the gateway. */
export type VerifyOptions = VerifyAccessTokenOptions;

export const DEFAULT_ALGORITHMS: readonly string[] = Object.freeze([
  'ES256',
  'RS256',
  'PS256',
  'EdDSA',
]);

// Far above any real access token (Entra's large ones are a few KB), low enough that a
// hostile header costs nothing to refuse.
const MAX_TOKEN_LENGTH = 16 * 1024;

type Failure = { ok: false; code: TokenErrorCode; description: string };
const fail = (code: TokenErrorCode, description: string): Failure => ({
  ok: false,
  code,
  description,
});

/**
 * Verifies a JWT access token and says who it speaks for. Refusals are returned with a code
 * and a description safe to send to the client (claim names, never claim values or keys).
 * Throws only for bugs (bad options) and unexpected failures.
 */
export async function verifyAccessToken(
  token: string,
  options: VerifyAccessTokenOptions,
): Promise<VerifyAccessTokenResult> {
  const now = options.now ?? nowMs;
  const tolerance = options.clockToleranceSec ?? 30;
  const algorithms = acceptableAlgorithms(options.algorithms ?? DEFAULT_ALGORITHMS);

  const screened = screenCompactJws(token, { maxLength: MAX_TOKEN_LENGTH, algorithms });
  if (!screened.ok) {
    if (screened.problem === 'shape')
      return fail('malformed', 'the access token is not a compact JWS');
    if (screened.problem === 'header')
      return fail('malformed', 'the access token header is not valid JSON');
    return fail('alg_not_allowed', 'the token signing algorithm is not allowed');
  }

  const verifyOptions: JWTVerifyOptions = {
    issuer: options.issuer,
    audience: options.audience,
    algorithms,
    clockTolerance: tolerance,
    // jose treats a token without `exp` as never expiring.
    requiredClaims: ['exp'],
    typ: options.requiredTyp,
    currentDate: new Date(now()),
  };

  let payload: JWTPayload;
  try {
    payload = await verifyWithAnyMatchingKey(token, options.keys, verifyOptions);
  } catch (error) {
    return refusalFor(error);
  }

  // jose checks `iat` only with maxTokenAge; a token issued in the future is as suspect as
  // one with a future `nbf`.
  if (typeof payload.iat === 'number' && payload.iat > now() / 1000 + tolerance) {
    return fail('not_yet_valid', 'the token "iat" is in the future');
  }

  const mapped = mapClaims(payload, options.claims);
  if (!mapped.ok) return mapped;
  // An identity that is not storable text (U+0000, unpaired surrogates) could never be
  // matched against a task row or audited: refuse the token rather than fail later.
  if (
    [mapped.subject, mapped.tenant, mapped.client, ...mapped.scopes].some((v) =>
      UNSTORABLE_TEXT.test(v),
    )
  ) {
    return fail('malformed', 'an identity claim contains characters that are not valid text');
  }

  const actor = actorOf(payload.act);
  if (actor === null) return fail('malformed', 'claim "act" is not a valid actor chain');

  const principal: Principal = {
    issuer: payload.iss!,
    tenant: mapped.tenant,
    subject: mapped.subject,
    client: mapped.client,
    scopes: mapped.scopes,
    expiresAt: payload.exp!,
  };
  if (typeof payload.jti === 'string') principal.tokenId = payload.jti;
  if (typeof payload.iat === 'number') principal.issuedAt = payload.iat;
  if (actor) principal.actor = actor;
  return { ok: true, principal, claims: payload };
}

/**
 * During a rotation an issuer may publish two keys a token without `kid` could match; jose
 * leaves trying each of them to the caller.
 */
async function verifyWithAnyMatchingKey(
  token: string,
  keys: KeyResolver,
  verifyOptions: JWTVerifyOptions,
): Promise<JWTPayload> {
  const getKey = typeof keys === 'function' ? keys : keys.getKey;
  try {
    return (await jwtVerify(token, getKey, verifyOptions)).payload;
  } catch (error) {
    if (!(error instanceof errors.JWKSMultipleMatchingKeys)) throw error;
    for await (const key of error) {
      try {
        return (await jwtVerify(token, key, verifyOptions)).payload;
      } catch (inner) {
        if (!(inner instanceof errors.JWSSignatureVerificationFailed)) throw inner;
      }
    }
    throw new errors.JWSSignatureVerificationFailed();
  }
}

function refusalFor(error: unknown): Failure {
  if (error instanceof KeysUnavailableError) {
    return fail('keys_unavailable', 'the issuer signing keys are unavailable, retry later');
  }
  if (error instanceof errors.JWTExpired) return fail('expired', 'the token has expired');
  if (error instanceof errors.JWTClaimValidationFailed) {
    const { claim, reason } = error;
    if (reason === 'missing') return fail('claim_missing', `missing claim "${claim}"`);
    if (reason === 'invalid') return fail('malformed', `claim "${claim}" has an invalid type`);
    switch (claim) {
      case 'iss':
        return fail('issuer_mismatch', 'the token issuer is not accepted here');
      case 'aud':
        return fail('audience_mismatch', 'the token audience is not this resource');
      case 'nbf':
        return fail('not_yet_valid', 'the token is not valid yet');
      case 'typ':
        return fail('type_mismatch', 'the token type is not an access token (at+jwt)');
    }
    return fail('malformed', `claim "${claim}" failed validation`);
  }
  if (error instanceof errors.JOSEAlgNotAllowed) {
    return fail('alg_not_allowed', 'the token signing algorithm is not allowed');
  }
  if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JOSENotSupported) {
    return fail('unknown_key', 'no known key matches the token');
  }
  if (error instanceof errors.JWSSignatureVerificationFailed) {
    return fail('bad_signature', 'the token signature is invalid');
  }
  if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid) {
    return fail('malformed', 'the access token is not a valid JWT');
  }
  throw error;
}

/** `undefined` when absent, `null` when present but not a chain of `{ sub }` objects. */
function actorOf(act: unknown, depth = 0): Actor | undefined | null {
  if (act === undefined) return undefined;
  if (depth > 8 || typeof act !== 'object' || act === null || Array.isArray(act)) return null;
  const { sub, act: inner } = act as { sub?: unknown; act?: unknown };
  if (typeof sub !== 'string' || !sub) return null;
  const next = actorOf(inner, depth + 1);
  if (next === null) return null;
  return next ? { sub, act: next } : { sub };
}
