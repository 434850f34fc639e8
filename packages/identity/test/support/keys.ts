import {
  exportJWK,
  generateKeyPair,
  SignJWT,
  type CryptoKey,
  type JWK,
  type JWTPayload,
} from 'jose';

/** A signing key as an issuer holds it: private key plus the public JWK it publishes. */
export type TestKey = {
  kid: string;
  alg: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  jwk: JWK;
};

export async function testKey(kid: string, alg = 'ES256'): Promise<TestKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { kid, alg, privateKey, publicKey, jwk };
}

export const jwksOf = (...keys: TestKey[]) => ({ keys: keys.map((k) => k.jwk) });

/** A frozen clock: epoch seconds used as "now" by every test token. */
export const NOW_S = 1_800_000_000;
export const NOW_MS = NOW_S * 1000;
export const ISSUER = 'http://127.0.0.1:9400';
export const AUDIENCE = 'http://127.0.0.1:3000/mcp';

/** Claims of an ordinary dev-IdP access token for alice@acme, valid for 5 minutes. */
export const baseClaims = (): JWTPayload => ({
  iss: ISSUER,
  aud: AUDIENCE,
  sub: 'alice',
  tenant: 'acme',
  client_id: 'mcp-agent',
  scope: 'env:provision reports:run',
  jti: 'tok-1',
  iat: NOW_S - 10,
  exp: NOW_S + 300,
});

export async function sign(
  key: TestKey,
  claims: JWTPayload,
  header: { kid?: string | null; typ?: string | null } = {},
): Promise<string> {
  const kid = header.kid === null ? undefined : (header.kid ?? key.kid);
  const typ = header.typ === null ? undefined : (header.typ ?? 'at+jwt');
  return new SignJWT(claims).setProtectedHeader({ alg: key.alg, kid, typ }).sign(key.privateKey);
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** A token assembled by hand, for headers no honest signer produces. */
export const rawToken = (header: object, claims: object, signature = '') =>
  `${b64(header)}.${b64(claims)}.${signature}`;
