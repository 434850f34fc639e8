import { beforeAll, describe, expect, test } from '@jest/globals';
import { ConfigError } from '@mtg/config';
import type { JWTPayload } from 'jose';
import {
  claimMappingFromEnv,
  createKeySource,
  mapClaims,
  resolveClaimMapping,
  verifyAccessToken,
  type ClaimMapping,
  type KeySource,
} from '../src/index.ts';
import { jwksOf, NOW_MS, NOW_S, sign, testKey, type TestKey } from './support/keys.ts';

let key: TestKey;
let keys: KeySource;
beforeAll(async () => {
  key = await testKey('idp-1', 'RS256');
  keys = createKeySource({ jwks: jwksOf(key) });
});

const times = { iat: NOW_S - 60, nbf: NOW_S - 60, exp: NOW_S + 3540 };

/** Signs the token as the issuer would and verifies it as the gateway configured for it would. */
async function principalOf(claims: JWTPayload, mapping: ClaimMapping, typ = 'JWT') {
  const token = await sign(key, { ...times, ...claims }, { typ });
  const result = await verifyAccessToken(token, {
    keys,
    issuer: claims.iss!,
    audience: Array.isArray(claims.aud) ? claims.aud[0]! : claims.aud!,
    claims: mapping,
    now: () => NOW_MS,
  });
  if (!result.ok) throw new Error(`${result.code}: ${result.description}`);
  return result.principal;
}

describe('presets map tokens shaped like their issuer', () => {
  test('keycloak: the realm in iss is the tenant, azp the client', async () => {
    const principal = await principalOf(
      {
        iss: 'https://kc.example.com/realms/acme',
        aud: ['mcp-gateway', 'account'],
        sub: 'f2c5a8e0-3b7d-4a8e-9c41-2d1f6b0e7a11',
        typ: 'Bearer',
        azp: 'mcp-agent',
        sid: '0b1c',
        realm_access: { roles: ['offline_access'] },
        scope: 'openid profile email env:provision',
        preferred_username: 'alice',
        jti: 'onrtac:7c2e',
      },
      resolveClaimMapping('keycloak'),
    );
    expect(principal).toEqual({
      issuer: 'https://kc.example.com/realms/acme',
      tenant: 'acme',
      subject: 'f2c5a8e0-3b7d-4a8e-9c41-2d1f6b0e7a11',
      client: 'mcp-agent',
      scopes: ['openid', 'profile', 'email', 'env:provision'],
      tokenId: 'onrtac:7c2e',
      expiresAt: NOW_S + 3540,
      issuedAt: NOW_S - 60,
    });
  });

  test('keycloak: a tenant claim (protocol mapper) wins over the realm', async () => {
    const principal = await principalOf(
      {
        iss: 'https://kc.example.com/realms/shared',
        aud: 'mcp-gateway',
        sub: 'u-1',
        azp: 'mcp-agent',
        scope: 'env:provision',
        tenant: 'globex',
      },
      resolveClaimMapping('keycloak'),
    );
    expect(principal.tenant).toBe('globex');
  });

  test('auth0: org_id is the tenant; scope and RBAC permissions are both scopes', async () => {
    const principal = await principalOf(
      {
        iss: 'https://acme.us.auth0.com/',
        aud: ['https://gateway.example.com/mcp', 'https://acme.us.auth0.com/userinfo'],
        sub: 'auth0|6543a1b2c3d4e5f6a7b8c9d0',
        azp: 'Kq2m9xYzAbCdEfGh',
        scope: 'openid profile env:provision',
        org_id: 'org_9ybzA1b2C3d4E5f6',
        permissions: ['env:provision', 'reports:run'],
      },
      resolveClaimMapping('auth0'),
      'at+jwt',
    );
    expect(principal).toMatchObject({
      tenant: 'org_9ybzA1b2C3d4E5f6',
      subject: 'auth0|6543a1b2c3d4e5f6a7b8c9d0',
      client: 'Kq2m9xYzAbCdEfGh',
      scopes: ['openid', 'profile', 'env:provision', 'reports:run'],
    });
  });

  test('auth0: a client-credentials token (client_id, no azp)', async () => {
    const principal = await principalOf(
      {
        iss: 'https://acme.us.auth0.com/',
        aud: 'https://gateway.example.com/mcp',
        sub: 'Kq2m9xYzAbCdEfGh@clients',
        client_id: 'Kq2m9xYzAbCdEfGh',
        gty: 'client-credentials',
        org_id: 'org_9ybzA1b2C3d4E5f6',
        permissions: ['reports:run'],
      },
      resolveClaimMapping('auth0'),
    );
    expect(principal).toMatchObject({ client: 'Kq2m9xYzAbCdEfGh', scopes: ['reports:run'] });
  });

  const tid = '72f988bf-86f1-41af-91ab-2d7cd011db47';
  const oid = '00000000-0000-0000-66f3-3332eca7ea81';

  test('entra v2: oid/tid/azp, scp string and roles array', async () => {
    const principal = await principalOf(
      {
        iss: `https://login.microsoftonline.com/${tid}/v2.0`,
        aud: '6e74172b-be56-4843-9ff4-e66a39bb12e3',
        sub: 'AAAAAAAAAAAAAAAAAAAAAIkzqFVrSaSaFHy782bbtaQ',
        oid,
        tid,
        azp: '4e4f5e2b-7c6d-4b8a-9e3f-1a2b3c4d5e6f',
        azpacr: '0',
        scp: 'Tasks.Run env:provision',
        roles: ['Reports.Admin'],
        ver: '2.0',
        uti: 'AbCdEf',
      },
      resolveClaimMapping('entra'),
    );
    expect(principal).toMatchObject({
      tenant: tid,
      subject: oid,
      client: '4e4f5e2b-7c6d-4b8a-9e3f-1a2b3c4d5e6f',
      scopes: ['Tasks.Run', 'env:provision', 'Reports.Admin'],
    });
  });

  test('entra v1: appid is the client', async () => {
    const principal = await principalOf(
      {
        iss: `https://sts.windows.net/${tid}/`,
        aud: 'api://6e74172b-be56-4843-9ff4-e66a39bb12e3',
        sub: 'l3_roISQU222bULS9yi2k0XpqpOiMz5H3ZACo1GeXA',
        oid,
        tid,
        appid: '4e4f5e2b-7c6d-4b8a-9e3f-1a2b3c4d5e6f',
        appidacr: '1',
        scp: 'user_impersonation',
        ver: '1.0',
      },
      resolveClaimMapping('entra'),
    );
    expect(principal).toMatchObject({
      tenant: tid,
      subject: oid,
      client: '4e4f5e2b-7c6d-4b8a-9e3f-1a2b3c4d5e6f',
      scopes: ['user_impersonation'],
    });
  });

  test('entra: an app-only token has roles and no scp', async () => {
    const principal = await principalOf(
      {
        iss: `https://login.microsoftonline.com/${tid}/v2.0`,
        aud: '6e74172b-be56-4843-9ff4-e66a39bb12e3',
        sub: oid,
        oid,
        tid,
        azp: '4e4f5e2b-7c6d-4b8a-9e3f-1a2b3c4d5e6f',
        roles: ['Tasks.Admin'],
      },
      resolveClaimMapping('entra'),
    );
    expect(principal.scopes).toEqual(['Tasks.Admin']);
  });

  test('okta: uid over the login in sub, cid, scp array, configured tenant claim', async () => {
    const token = {
      iss: 'https://acme.okta.com/oauth2/default',
      aud: 'api://mcp-gateway',
      sub: 'alice@acme.example',
      uid: '00u1a2b3c4D5e6F7g8h9',
      cid: '0oa1b2c3d4E5f6G7h8i9',
      scp: ['openid', 'env:provision'],
      ver: 1,
      jti: 'AT.abc',
      customer: 'acme',
    };
    const principal = await principalOf(
      token,
      resolveClaimMapping('okta', { tenant: { claim: ['customer'] } }),
    );
    expect(principal).toMatchObject({
      tenant: 'acme',
      subject: '00u1a2b3c4D5e6F7g8h9',
      client: '0oa1b2c3d4E5f6G7h8i9',
      scopes: ['openid', 'env:provision'],
      tokenId: 'AT.abc',
    });
    // The preset alone looks for "tenant", which Okta does not issue by itself.
    await expect(principalOf(token, resolveClaimMapping('okta'))).rejects.toThrow(
      'claim_missing: missing tenant claim: "tenant"',
    );
  });

  test('default (dev IdP): client_id when there is no azp', async () => {
    const principal = await principalOf(
      {
        iss: 'http://127.0.0.1:9400',
        aud: 'http://127.0.0.1:3000/mcp',
        sub: 'alice',
        tenant: 'acme',
        client_id: 'mcp-agent',
        scope: 'env:provision',
      },
      resolveClaimMapping('default'),
      'at+jwt',
    );
    expect(principal).toMatchObject({ subject: 'alice', tenant: 'acme', client: 'mcp-agent' });
  });
});

describe('mapClaims', () => {
  const keycloak = resolveClaimMapping('keycloak');

  test('keycloak without a realm issuer or tenant claim names both sources', () => {
    expect(
      mapClaims({ iss: 'https://kc.example.com/', sub: 's', azp: 'c', scope: '' }, keycloak),
    ).toEqual({
      ok: false,
      code: 'claim_missing',
      description: 'missing tenant claim: "tenant" or a realm in "iss"',
    });
  });

  test('an empty scope string is present and grants nothing', () => {
    const mapped = mapClaims(
      { iss: 'https://kc.example.com/realms/acme', sub: 's', azp: 'c', scope: '' },
      keycloak,
    );
    expect(mapped).toMatchObject({ ok: true, scopes: [] });
  });

  test('a scope claim in the wrong format is refused, not reinterpreted', () => {
    const okta = resolveClaimMapping('okta');
    expect(mapClaims({ uid: 'u', tenant: 't', cid: 'c', scp: 'a b' }, okta)).toEqual({
      ok: false,
      code: 'malformed',
      description: 'claim "scp" must be an array of strings',
    });
  });

  test('duplicate scopes across claims appear once', () => {
    const auth0 = resolveClaimMapping('auth0');
    const mapped = mapClaims(
      { sub: 's', org_id: 'o', azp: 'c', scope: 'a b', permissions: ['b', 'c'] },
      auth0,
    );
    expect(mapped).toMatchObject({ ok: true, scopes: ['a', 'b', 'c'] });
  });
});

describe('resolveClaimMapping', () => {
  test('overrides replace lists and merge into the tenant mapping', () => {
    expect(
      resolveClaimMapping('keycloak', {
        subject: ['preferred_username'],
        tenant: { claim: ['organization_id'] },
        scopes: [{ claim: 'roles', format: 'array' }],
      }),
    ).toEqual({
      subject: ['preferred_username'],
      tenant: { claim: ['organization_id'], fromIssuerRealm: true },
      client: ['azp'],
      scopes: [{ claim: 'roles', format: 'array' }],
    });
  });

  test('returns a copy: changing it leaves the preset alone', () => {
    resolveClaimMapping('default').subject.push('mutated');
    expect(resolveClaimMapping('default').subject).toEqual(['sub']);
  });

  test('refuses a mapping that can never produce a principal', () => {
    expect(() => resolveClaimMapping('default', { client: [] })).toThrow(TypeError);
    expect(() => resolveClaimMapping('default', { tenant: { claim: [] } })).toThrow(
      /tenant has no source/,
    );
  });
});

describe('claimMappingFromEnv', () => {
  test('no variables: the dev IdP mapping', () => {
    expect(claimMappingFromEnv({})).toEqual(resolveClaimMapping('default'));
  });

  test('a preset with overrides from comma-separated lists', () => {
    expect(
      claimMappingFromEnv({
        AUTH_PRESET: 'entra',
        AUTH_CLAIM_SUBJECT: 'oid, sub',
        AUTH_CLAIM_TENANT: 'tid',
        AUTH_CLAIM_CLIENT: 'azp,appid',
        AUTH_CLAIM_SCOPES: 'scp:space, roles:array, https://example.com/perms:array',
      }),
    ).toEqual({
      subject: ['oid', 'sub'],
      tenant: { claim: ['tid'] },
      client: ['azp', 'appid'],
      scopes: [
        { claim: 'scp', format: 'space' },
        { claim: 'roles', format: 'array' },
        { claim: 'https://example.com/perms', format: 'array' },
      ],
    });
  });

  test('a fixed tenant alone pins every token to it', () => {
    const mapping = claimMappingFromEnv({ AUTH_PRESET: 'okta', AUTH_TENANT_FIXED: 'acme' });
    expect(mapping.tenant).toEqual({ claim: [], fromIssuerRealm: false, fixed: 'acme' });
    expect(mapClaims({ uid: 'u', cid: 'c', scp: [], tenant: 'other' }, mapping)).toMatchObject({
      ok: true,
      tenant: 'acme',
    });
  });

  test.each([
    ['AUTH_PRESET', 'cognito'],
    ['AUTH_CLAIM_SUBJECT', ' , '],
    ['AUTH_CLAIM_SCOPES', 'scp'],
    ['AUTH_CLAIM_SCOPES', 'scp:list'],
    ['AUTH_CLAIM_SCOPES', ':space'],
  ])('%s=%j is a ConfigError naming the variable', (variable, value) => {
    let error: unknown;
    try {
      claimMappingFromEnv({ [variable]: value });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).issues.map((i) => i.variable)).toEqual([variable]);
  });
});
