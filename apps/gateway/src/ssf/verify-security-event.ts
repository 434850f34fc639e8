import { nowMs } from '@mtg/clock';
import {
  errors,
  jwtVerify,
  type JWTPayload,
  type JWTVerifyGetKey,
  type JWTVerifyOptions,
  type ProtectedHeaderParameters,
} from 'jose';
import {
  acceptableAlgorithms,
  DEFAULT_ALGORITHMS,
  KeysUnavailableError,
  screenCompactJws,
} from '@mtg/identity';
import { refuse, type SetRefusal } from './set-errors.ts';

export interface VerifySecurityEventOptions {
  /** The transmitter's keys (a key source's getKey). */
  keys: JWTVerifyGetKey;
  /** The transmitter: `iss` must equal it. */
  issuer: string;
  /** This receiver: `aud` must contain it. */
  audience: string;
  /** Allow-list, default ES256, RS256, PS256, EdDSA; `none` and HS* are refused whatever it says. */
  algorithms?: readonly string[];
  /** `iat` may be at most this far in the past, or in the future. */
  maxAgeSeconds: number;
  /** Epoch milliseconds. */
  now?: () => number;
}

/** The claims of a verified SET that the receiver reads; the rest is kept as given. */
export interface SecurityEventClaims extends JWTPayload {
  iss: string;
  jti: string;
  iat: number;
  events: Record<string, Record<string, unknown>>;
}

export type VerifySecurityEventResult =
  { ok: true; claims: SecurityEventClaims; header: ProtectedHeaderParameters } | SetRefusal;

export const SET_TYP = 'secevent+jwt';
// A SET is a few hundred bytes; this is far above any real one.
export const MAX_SET_LENGTH = 32 * 1024;
const MAX_JTI_LENGTH = 256;

/**
 * Verifies a pushed SET (RFC 8417 / RFC 8935 §2): signed by the transmitter with an allowed
 * algorithm, `typ: secevent+jwt`, `iss` the transmitter, `aud` this receiver, with `jti`,
 * `iat` within the freshness window, and `events`. Refusals carry the RFC 8935 error code and
 * a description safe to send back (claim names, never values). Throws only for bugs.
 */
export async function verifySecurityEvent(
  token: string,
  options: VerifySecurityEventOptions,
): Promise<VerifySecurityEventResult> {
  const now = options.now ?? nowMs;
  const algorithms = acceptableAlgorithms(options.algorithms ?? DEFAULT_ALGORITHMS);
  const screened = screenCompactJws(token, { maxLength: MAX_SET_LENGTH, algorithms });
  if (!screened.ok) {
    if (screened.problem === 'shape')
      return refuse('invalid_request', 'the body is not a compact JWS');
    if (screened.problem === 'header')
      return refuse('invalid_request', 'the SET header is not valid JSON');
    return refuse('invalid_key', 'the SET signing algorithm is not accepted');
  }

  const verifyOptions: JWTVerifyOptions = {
    issuer: options.issuer,
    audience: options.audience,
    algorithms,
    typ: SET_TYP,
    requiredClaims: ['jti', 'iat', 'events'],
    currentDate: new Date(now()),
  };
  let verified: { payload: JWTPayload; protectedHeader: ProtectedHeaderParameters };
  try {
    verified = await verifyWithAnyMatchingKey(token, options.keys, verifyOptions);
  } catch (error) {
    return refusalFor(error);
  }

  const claims = verified.payload;
  // jose only checks iat's type; freshness in both directions is ours (replay defence: a jti
  // is remembered for longer than a SET stays acceptable).
  const ageSeconds = now() / 1000 - (claims.iat as number);
  if (Math.abs(ageSeconds) > options.maxAgeSeconds) {
    return refuse(
      'invalid_request',
      `the SET "iat" is outside the accepted window of ${options.maxAgeSeconds} seconds`,
    );
  }
  if (
    typeof claims.jti !== 'string' ||
    claims.jti.length === 0 ||
    claims.jti.length > MAX_JTI_LENGTH ||
    claims.jti.includes('\u0000')
  ) {
    return refuse('invalid_request', 'claim "jti" must be a non-empty string');
  }
  if (!isEvents(claims.events)) {
    return refuse('invalid_request', 'claim "events" must be an object of event objects');
  }
  return { ok: true, claims: claims as SecurityEventClaims, header: verified.protectedHeader };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isEvents(value: unknown): value is Record<string, Record<string, unknown>> {
  return isObject(value) && Object.keys(value).length > 0 && Object.values(value).every(isObject);
}

/** During a key rotation a SET without `kid` may match two keys; try each (jose leaves it to us). */
async function verifyWithAnyMatchingKey(
  token: string,
  getKey: JWTVerifyGetKey,
  verifyOptions: JWTVerifyOptions,
) {
  try {
    return await jwtVerify(token, getKey, verifyOptions);
  } catch (error) {
    if (!(error instanceof errors.JWKSMultipleMatchingKeys)) throw error;
    for await (const key of error) {
      try {
        return await jwtVerify(token, key, verifyOptions);
      } catch (inner) {
        if (!(inner instanceof errors.JWSSignatureVerificationFailed)) throw inner;
      }
    }
    throw new errors.JWSSignatureVerificationFailed();
  }
}

function refusalFor(error: unknown): SetRefusal {
  if (error instanceof KeysUnavailableError) {
    return {
      ok: false,
      code: 'keys_unavailable',
      description: 'the transmitter keys are unavailable, retry later',
    };
  }
  if (
    error instanceof errors.JWKSNoMatchingKey ||
    error instanceof errors.JWSSignatureVerificationFailed ||
    error instanceof errors.JOSEAlgNotAllowed ||
    error instanceof errors.JOSENotSupported
  ) {
    return refuse('invalid_key', 'the SET is not signed by a key of the transmitter');
  }
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === 'iss')
      return refuse('invalid_issuer', 'the SET issuer is not the transmitter');
    if (error.claim === 'aud')
      return refuse('invalid_audience', 'the SET audience is not this receiver');
    if (error.claim === 'typ')
      return refuse('invalid_request', `the SET header "typ" must be ${SET_TYP}`);
    if (error.reason === 'missing')
      return refuse('invalid_request', `missing claim "${error.claim}"`);
    return refuse('invalid_request', `claim "${error.claim}" is not valid`);
  }
  // A SET need not carry `exp`; one that does and has passed it is stale.
  if (error instanceof errors.JWTExpired) return refuse('invalid_request', 'the SET has expired');
  if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid) {
    return refuse('invalid_request', 'the SET is not a valid JWT');
  }
  throw error;
}
