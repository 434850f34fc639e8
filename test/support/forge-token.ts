import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  base64url,
  calculateJwkThumbprint,
  exportJWK,
  generateKeyPair,
  importJWK,
  SignJWT,
  type CryptoKey,
  type JWK,
  type JWTPayload,
} from 'jose';

/**
 * Forged access tokens for negative tests of the gateway's token checks. Each helper builds
 * exactly one defect into an otherwise well-formed RFC 9068 token, so a test can assert the
 * specific refusal for it.
 */

/** A signing key: the private half, and the kid the token header will name. */
export type SigningKey = { privateKey: CryptoKey | Uint8Array; kid: string; alg: string };

/** A fresh ES256 key nobody trusts (an attacker's, or another issuer's). */
export async function generateForeignKey(): Promise<SigningKey & { publicJwk: JWK }> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const publicJwk = await exportJWK(publicKey);
  return { privateKey, publicJwk, kid: await calculateJwkThumbprint(publicJwk), alg: 'ES256' };
}

/** The issuer's published key set (what the gateway trusts). */
export async function fetchJwks(issuer: string): Promise<{ keys: Array<JWK & { kid: string }> }> {
  const response = await fetch(`${issuer}/jwks`);
  if (!response.ok) throw new Error(`GET ${issuer}/jwks: HTTP ${response.status}`);
  return (await response.json()) as { keys: Array<JWK & { kid: string }> };
}

/**
 * The private signing key of the dev IdP running at `issuer`, read from its state directory.
 * startStack gives the IdP a `mtg-stack-*` directory under the OS temp dir and the IdP keeps
 * its key in `<dataDir>/idp/signing-key.json` (apps/idp/src/create-idp.ts); the key whose
 * kid the issuer publishes is this stack's. Tokens signed with it pass the signature check,
 * so a test reaches the claim checks behind it (issuer, nbf, tenant…), which a token signed
 * with any other key never would. Only the dev IdP keeps its key on disk like this.
 */
export async function devIdpSigningKey(issuer: string): Promise<SigningKey> {
  const { keys } = await fetchJwks(issuer);
  const kids = new Set(keys.map((k) => k.kid));
  const tmp = os.tmpdir();
  for (const entry of await readdir(tmp)) {
    if (!entry.startsWith('mtg-stack-')) continue;
    let jwk: JWK & { kid?: string; alg?: string };
    try {
      jwk = JSON.parse(await readFile(path.join(tmp, entry, 'idp', 'signing-key.json'), 'utf8'));
    } catch {
      continue; // another stack's directory, being created or removed
    }
    if (jwk.kid && kids.has(jwk.kid) && jwk.d) {
      const alg = jwk.alg ?? 'ES256';
      return { privateKey: (await importJWK(jwk, alg)) as CryptoKey, kid: jwk.kid, alg };
    }
  }
  throw new Error(`no signing key of the dev IdP at ${issuer} found under ${tmp}/mtg-stack-*`);
}

/** Claims of a user access token as the dev IdP issues it, for `audience`, valid for an hour. */
export function userClaims(options: {
  issuer: string;
  audience: string;
  sub?: string;
  tenant?: string;
  client?: string;
  scope?: string;
}): JWTPayload {
  const now = Math.floor(Date.now() / 1000);
  const client = options.client ?? 'mcp-agent';
  return {
    iss: options.issuer,
    aud: options.audience,
    sub: options.sub ?? 'alice',
    tenant: options.tenant ?? 'acme',
    client_id: client,
    azp: client,
    scope: options.scope ?? 'env:provision reports:run records:write',
    iat: now,
    exp: now + 3600,
    jti: crypto.randomUUID(),
  };
}

/** A compact JWS over `claims` with `key` (header: alg, kid, typ at+jwt unless overridden). */
export async function signToken(
  claims: JWTPayload,
  key: SigningKey,
  header: { typ?: string; kid?: string | null } = {},
): Promise<string> {
  const kid = header.kid === null ? undefined : (header.kid ?? key.kid);
  return new SignJWT(claims)
    .setProtectedHeader({ alg: key.alg, typ: header.typ ?? 'at+jwt', ...(kid ? { kid } : {}) })
    .sign(key.privateKey);
}

/**
 * An unsecured JWT (RFC 7519 §6, `alg: none`): header and payload with an empty signature.
 * jose refuses to produce one, so it is put together by hand.
 */
export function unsecuredToken(claims: JWTPayload, header: Record<string, unknown> = {}): string {
  const part = (value: unknown) => base64url.encode(JSON.stringify(value));
  return `${part({ alg: 'none', typ: 'at+jwt', ...header })}.${part(claims)}.`;
}

/**
 * The algorithm-confusion attack: HS256 with the issuer's *public* JWK (as its JSON text) as
 * the HMAC secret. A verifier that takes its key material from the JWKS and lets the token
 * choose the algorithm would accept it.
 */
export async function hmacWithPublicKey(
  claims: JWTPayload,
  publicJwk: JWK & { kid: string },
): Promise<string> {
  const secret = new TextEncoder().encode(JSON.stringify(publicJwk));
  return signToken(claims, { privateKey: secret, kid: publicJwk.kid, alg: 'HS256' });
}
