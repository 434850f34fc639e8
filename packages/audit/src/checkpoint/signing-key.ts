import { generateKeyPairSync } from 'node:crypto';
import { calculateJwkThumbprint, importJWK, type CryptoKey, type JWK } from 'jose';

/** The checkpoint signing algorithm: Ed25519 (RFC 8037), JWS alg EdDSA. */
export const CHECKPOINT_ALG = 'EdDSA';

export interface SigningKey {
  /** `kid` of every checkpoint it signs: the JWK's own kid, else its RFC 7638 thumbprint. */
  keyId: string;
  privateKey: CryptoKey;
  /** What verifiers need (put it in their JWKS). */
  publicJwk: JWK;
}

export class SigningKeyError extends Error {
  readonly code = 'invalid_signing_key';
  constructor(message: string) {
    super(message);
    this.name = 'SigningKeyError';
  }
}

/** A new Ed25519 private JWK, its kid the RFC 7638 thumbprint of the public key. */
export async function generateSigningJwk(): Promise<JWK> {
  const { privateKey } = generateKeyPairSync('ed25519');
  const jwk = privateKey.export({ format: 'jwk' }) as JWK;
  const kid = await calculateJwkThumbprint({ kty: jwk.kty!, crv: jwk.crv!, x: jwk.x! });
  return { kty: jwk.kty, crv: jwk.crv, x: jwk.x, d: jwk.d, kid, alg: CHECKPOINT_ALG, use: 'sig' };
}

/** The public half of a private JWK, for a JWKS. */
export function publicJwkOf(jwk: JWK): JWK {
  const { d: _private, ...rest } = jwk;
  return { ...rest, alg: CHECKPOINT_ALG, use: 'sig' };
}

/** Reads a private Ed25519 JWK (JSON text or parsed). */
export async function loadSigningKey(input: string | JWK): Promise<SigningKey> {
  let jwk: JWK;
  try {
    jwk = typeof input === 'string' ? (JSON.parse(input) as JWK) : input;
  } catch {
    throw new SigningKeyError('the signing key is not JSON (expected a private Ed25519 JWK)');
  }
  if (!jwk || jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') {
    throw new SigningKeyError(
      'the signing key is not an Ed25519 JWK ({"kty":"OKP","crv":"Ed25519",...})',
    );
  }
  if (typeof jwk.d !== 'string') {
    throw new SigningKeyError('the signing key has no private part ("d"): that is a public key');
  }
  const keyId = jwk.kid ?? (await calculateJwkThumbprint({ kty: 'OKP', crv: 'Ed25519', x: jwk.x }));
  const privateKey = (await importJWK(
    { ...jwk, alg: CHECKPOINT_ALG },
    CHECKPOINT_ALG,
  )) as CryptoKey;
  return { keyId, privateKey, publicJwk: { ...publicJwkOf(jwk), kid: keyId } };
}
