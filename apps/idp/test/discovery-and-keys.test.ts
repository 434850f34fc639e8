import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { generateDevSecrets } from '@mtg/dev-secrets';
import { DEV_USER_GRANT, TOKEN_EXCHANGE_GRANT } from '../src/grant-types.ts';
import { devUserToken, RESOURCES, startTestIdp, type TestIdp } from './support/test-idp.ts';

describe('discovery', () => {
  let idp: TestIdp;
  beforeAll(async () => {
    idp = await startTestIdp();
  });
  afterAll(() => idp.close());

  test('serves OpenID/OAuth metadata naming the grants, scopes and ES256', async () => {
    const response = await fetch(`${idp.issuer}/.well-known/openid-configuration`);
    expect(response.status).toBe(200);
    const metadata = (await response.json()) as Record<string, unknown>;
    expect(metadata).toMatchObject({
      issuer: idp.issuer,
      token_endpoint: `${idp.issuer}/token`,
      jwks_uri: `${idp.issuer}/jwks`,
      registration_endpoint: `${idp.issuer}/reg`,
      id_token_signing_alg_values_supported: ['ES256'],
      code_challenge_methods_supported: ['S256'],
    });
    expect(metadata.grant_types_supported).toEqual(
      expect.arrayContaining([
        'authorization_code',
        'refresh_token',
        'client_credentials',
        DEV_USER_GRANT,
        TOKEN_EXCHANGE_GRANT,
      ]),
    );
    expect(metadata.scopes_supported).toEqual(
      expect.arrayContaining(['env:provision', 'reports:run', 'records:write', 'tasks:admin']),
    );
  });

  test('the issuer is the URL actually bound when none is configured', () => {
    expect(idp.issuer).toBe(idp.url);
    expect(idp.issuer).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  });

  test('serves one ES256 public key in the JWKS', async () => {
    const jwks = (await (await fetch(`${idp.issuer}/jwks`)).json()) as {
      keys: Record<string, unknown>[];
    };
    expect(jwks.keys).toHaveLength(1);
    expect(jwks.keys[0]).toMatchObject({
      kty: 'EC',
      crv: 'P-256',
      alg: 'ES256',
      use: 'sig',
      kid: idp.idp.kid,
    });
    expect(jwks.keys[0]!.d).toBeUndefined();
  });

  test('serves Shared Signals transmitter metadata', async () => {
    const response = await fetch(`${idp.issuer}/.well-known/ssf-configuration`);
    expect(await response.json()).toEqual({
      spec_version: '1_0',
      issuer: idp.issuer,
      jwks_uri: `${idp.issuer}/jwks`,
      delivery_methods_supported: ['urn:ietf:rfc:8935'],
    });
  });
});

describe('signing key', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'mtg-idp-keys-'));
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  test('is generated once, kept private on disk, and reused after a restart', async () => {
    const secrets = generateDevSecrets();
    const first = await startTestIdp({ dataDir, secrets });
    const agent = await first.client('mcp-agent');
    const { access_token } = await devUserToken(agent, { sub: 'alice', tenant: 'acme' });
    const kid = first.idp.kid;
    await first.close();

    const file = path.join(dataDir, 'idp', 'signing-key.json');
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(file, 'utf8'))).toMatchObject({
      kid,
      alg: 'ES256',
      d: expect.any(String),
    });

    // The restarted IdP gets another port, hence another issuer; the key is what must survive.
    const second = await startTestIdp({ dataDir, secrets });
    try {
      expect(second.idp.kid).toBe(kid);
      const jwks = createRemoteJWKSet(new URL(`${second.issuer}/jwks`));
      const { payload } = await jwtVerify(access_token, jwks, { audience: RESOURCES.gateway });
      expect(payload.sub).toBe('alice');
    } finally {
      await second.close();
    }
  });
});
