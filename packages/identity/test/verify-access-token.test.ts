import { describe, expect, test, beforeAll } from '@jest/globals';
import { CompactSign, exportSPKI, SignJWT } from 'jose';
import {
  createKeySource,
  resolveClaimMapping,
  verifyAccessToken,
  type KeySource,
  type VerifyAccessTokenOptions,
} from '../src/index.ts';
import {
  AUDIENCE,
  baseClaims,
  ISSUER,
  jwksOf,
  NOW_MS,
  NOW_S,
  rawToken,
  sign,
  testKey,
  type TestKey,
} from './support/keys.ts';

let es: TestKey;
let rs: TestKey;
let keys: KeySource;

beforeAll(async () => {
  es = await testKey('es-1', 'ES256');
  rs = await testKey('rs-1', 'RS256');
  keys = createKeySource({ jwks: jwksOf(es, rs) });
});

const options = (over: Partial<VerifyAccessTokenOptions> = {}): VerifyAccessTokenOptions => ({
  keys,
  issuer: ISSUER,
  audience: AUDIENCE,
  claims: resolveClaimMapping('default'),
  now: () => NOW_MS,
  ...over,
});

async function refusal(token: string, over: Partial<VerifyAccessTokenOptions> = {}) {
  const result = await verifyAccessToken(token, options(over));
  if (result.ok) throw new Error('expected the token to be refused');
  return result;
}

describe('verifyAccessToken accepts', () => {
  test('a dev-IdP token, and says who it speaks for', async () => {
    const result = await verifyAccessToken(await sign(es, baseClaims()), options());
    expect(result).toEqual({
      ok: true,
      principal: {
        issuer: ISSUER,
        tenant: 'acme',
        subject: 'alice',
        client: 'mcp-agent',
        scopes: ['env:provision', 'reports:run'],
        tokenId: 'tok-1',
        expiresAt: NOW_S + 300,
        issuedAt: NOW_S - 10,
      },
      claims: expect.objectContaining({ sub: 'alice', tenant: 'acme' }),
    });
  });

  test('RSA tokens and an aud array containing this resource', async () => {
    const token = await sign(rs, { ...baseClaims(), aud: ['https://other.example', AUDIENCE] });
    expect((await verifyAccessToken(token, options())).ok).toBe(true);
  });

  test('a token expired by less than the clock tolerance', async () => {
    const token = await sign(es, { ...baseClaims(), exp: NOW_S - 29 });
    expect((await verifyAccessToken(token, options())).ok).toBe(true);
  });

  test('a token whose nbf is in the future by less than the tolerance', async () => {
    const token = await sign(es, { ...baseClaims(), nbf: NOW_S + 20, iat: NOW_S + 20 });
    expect((await verifyAccessToken(token, options())).ok).toBe(true);
  });

  test('typ at+jwt and application/at+jwt when at+jwt is required', async () => {
    const short = await sign(es, baseClaims(), { typ: 'at+jwt' });
    const long = await sign(es, baseClaims(), { typ: 'application/at+jwt' });
    expect((await verifyAccessToken(short, options({ requiredTyp: 'at+jwt' }))).ok).toBe(true);
    expect((await verifyAccessToken(long, options({ requiredTyp: 'at+jwt' }))).ok).toBe(true);
  });

  test('a delegated token, with its actor chain', async () => {
    const token = await sign(es, {
      ...baseClaims(),
      act: { sub: 'mcp-worker', act: { sub: 'mcp-gateway' } },
    });
    const result = await verifyAccessToken(token, options());
    expect(result.ok && result.principal.actor).toEqual({
      sub: 'mcp-worker',
      act: { sub: 'mcp-gateway' },
    });
  });

  test('a token without kid when two published keys could match (rotation)', async () => {
    const next = await testKey('es-2', 'ES256');
    const token = await sign(next, baseClaims(), { kid: null });
    const rotating = createKeySource({ jwks: jwksOf(es, next) });
    expect((await verifyAccessToken(token, options({ keys: rotating }))).ok).toBe(true);
  });

  test('a plain jose key resolver as keys', async () => {
    const result = await verifyAccessToken(
      await sign(es, baseClaims()),
      options({ keys: keys.getKey }),
    );
    expect(result.ok).toBe(true);
  });
});

describe('verifyAccessToken refuses', () => {
  test.each([
    ['an empty string', ''],
    ['two segments', 'eyJhbGciOiJFUzI1NiJ9.e30'],
    ['a header that is not JSON', 'bm90IGpzb24.e30.c2ln'],
    ['characters outside base64url', 'eyJhbGciOiJFUzI1NiJ9.e30.a+b/c='],
  ])('%s as malformed', async (_name, token) => {
    expect((await refusal(token)).code).toBe('malformed');
  });

  test('a correctly signed payload that is not a claims set as malformed', async () => {
    const token = await new CompactSign(new TextEncoder().encode('["not","an","object"]'))
      .setProtectedHeader({ alg: 'ES256', kid: 'es-1' })
      .sign(es.privateKey);
    expect((await refusal(token)).code).toBe('malformed');
  });

  test('alg none, even when someone configured it', async () => {
    const token = rawToken({ alg: 'none', typ: 'at+jwt' }, baseClaims());
    expect(await refusal(token)).toEqual({
      ok: false,
      code: 'alg_not_allowed',
      description: 'the token signing algorithm is not allowed',
    });
    expect((await refusal(token, { algorithms: ['none', 'ES256'] })).code).toBe('alg_not_allowed');
  });

  test('HS256 signed with the public key bytes (algorithm confusion), even if configured', async () => {
    const pem = await exportSPKI(rs.publicKey);
    for (const secret of [pem, JSON.stringify(rs.jwk)]) {
      const token = await new SignJWT(baseClaims())
        .setProtectedHeader({ alg: 'HS256', kid: 'rs-1', typ: 'at+jwt' })
        .sign(new TextEncoder().encode(secret));
      expect((await refusal(token)).code).toBe('alg_not_allowed');
      expect((await refusal(token, { algorithms: ['HS256', 'RS256'] })).code).toBe(
        'alg_not_allowed',
      );
    }
  });

  test('an algorithm outside a narrowed allow-list', async () => {
    const token = await sign(es, baseClaims());
    expect((await refusal(token, { algorithms: ['RS256'] })).code).toBe('alg_not_allowed');
  });

  test('a kid the key set does not have', async () => {
    const stranger = await testKey('es-9', 'ES256');
    expect(await refusal(await sign(stranger, baseClaims()))).toEqual({
      ok: false,
      code: 'unknown_key',
      description: 'no known key matches the token',
    });
  });

  test('a token signed by another key under a known kid', async () => {
    const impostor = await testKey('es-1', 'ES256');
    expect((await refusal(await sign(impostor, baseClaims()))).code).toBe('bad_signature');
  });

  test('a token whose payload was changed after signing', async () => {
    const [header, , signature] = (await sign(es, baseClaims())).split('.');
    const payload = Buffer.from(JSON.stringify({ ...baseClaims(), tenant: 'globex' })).toString(
      'base64url',
    );
    expect((await refusal(`${header}.${payload}.${signature}`)).code).toBe('bad_signature');
  });

  test('a token expired beyond the clock tolerance', async () => {
    const token = await sign(es, { ...baseClaims(), exp: NOW_S - 31 });
    expect(await refusal(token)).toEqual({
      ok: false,
      code: 'expired',
      description: 'the token has expired',
    });
    // with no tolerance, one second late is late
    const late = await sign(es, { ...baseClaims(), exp: NOW_S - 1 });
    expect((await refusal(late, { clockToleranceSec: 0 })).code).toBe('expired');
  });

  test('a token whose nbf is beyond the tolerance', async () => {
    const token = await sign(es, { ...baseClaims(), nbf: NOW_S + 120 });
    expect((await refusal(token)).code).toBe('not_yet_valid');
  });

  test('a token issued in the future beyond the tolerance', async () => {
    const token = await sign(es, { ...baseClaims(), iat: NOW_S + 120, exp: NOW_S + 600 });
    expect((await refusal(token)).code).toBe('not_yet_valid');
  });

  test('another issuer', async () => {
    const token = await sign(es, { ...baseClaims(), iss: 'https://evil.example' });
    const result = await refusal(token);
    expect(result.code).toBe('issuer_mismatch');
    expect(result.description).not.toContain('evil');
  });

  test('a token for another audience (not passed through from another resource)', async () => {
    const token = await sign(es, { ...baseClaims(), aud: 'https://downstream.example' });
    const result = await refusal(token);
    expect(result.code).toBe('audience_mismatch');
    expect(result.description).not.toContain('downstream');
  });

  test('a token without exp (jose would let it live forever)', async () => {
    const { exp: _exp, ...claims } = baseClaims();
    expect(await refusal(await sign(es, claims))).toEqual({
      ok: false,
      code: 'claim_missing',
      description: 'missing claim "exp"',
    });
  });

  test('a token without the tenant claim, naming the claim', async () => {
    const { tenant: _tenant, ...claims } = baseClaims();
    expect(await refusal(await sign(es, claims))).toEqual({
      ok: false,
      code: 'claim_missing',
      description: 'missing tenant claim: "tenant"',
    });
  });

  test.each([
    ['subject', 'sub', 'missing subject claim: "sub"'],
    ['client', 'client_id', 'missing client claim: "azp" or "client_id"'],
    ['scopes', 'scope', 'missing scope claim: "scope"'],
  ])('a token without %s', async (_role, claim, description) => {
    const claims = baseClaims();
    delete claims[claim];
    expect(await refusal(await sign(es, claims))).toEqual({
      ok: false,
      code: 'claim_missing',
      description,
    });
  });

  test('an ID token or plain JWT where at+jwt is required', async () => {
    const jwt = await sign(es, baseClaims(), { typ: 'JWT' });
    const none = await sign(es, baseClaims(), { typ: null });
    for (const token of [jwt, none]) {
      expect(await refusal(token, { requiredTyp: 'at+jwt' })).toEqual({
        ok: false,
        code: 'type_mismatch',
        description: 'the token type is not an access token (at+jwt)',
      });
    }
  });

  test('a present claim of the wrong type, without falling through to the next claim', async () => {
    const token = await sign(es, { ...baseClaims(), azp: 42 });
    expect(await refusal(token)).toEqual({
      ok: false,
      code: 'malformed',
      description: 'claim "azp" must be a non-empty string',
    });
  });

  test('an act claim that is not an actor chain', async () => {
    const token = await sign(es, { ...baseClaims(), act: { client: 'x' } });
    expect((await refusal(token)).code).toBe('malformed');
  });

  test('every token while the issuer keys have never loaded', async () => {
    const unreachable = createKeySource({
      jwksUri: 'http://127.0.0.1:9/jwks',
      fetch: async () => {
        throw new TypeError('fetch failed');
      },
      now: () => NOW_MS,
      onError: () => {},
    });
    expect(await refusal(await sign(es, baseClaims()), { keys: unreachable })).toEqual({
      ok: false,
      code: 'keys_unavailable',
      description: 'the issuer signing keys are unavailable, retry later',
    });
  });
});

describe('refusal descriptions', () => {
  test('carry no claim values and no key material', async () => {
    const secretish = 'tenant-secret-value-xyz';
    const tokens = [
      await sign(es, { ...baseClaims(), iss: secretish }),
      await sign(es, { ...baseClaims(), aud: secretish }),
      await sign(es, { ...baseClaims(), exp: NOW_S - 600, sub: secretish }),
      await sign(es, { ...baseClaims(), tenant: undefined, sub: secretish }),
      await sign(await testKey('es-1'), { ...baseClaims(), sub: secretish }),
    ];
    for (const token of tokens) {
      const { description } = await refusal(token);
      expect(description).not.toContain(secretish);
      expect(description).not.toMatch(/BEGIN|"x"|"y"|"n"/);
    }
  });
});
