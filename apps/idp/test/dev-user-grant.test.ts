import { createRemoteJWKSet, errors as joseErrors, jwtVerify } from 'jose';
import * as client from 'openid-client';
import { DEV_USER_GRANT } from '../src/grant-types.ts';
import {
  admin,
  decode,
  devUserToken,
  oauthError,
  RESOURCES,
  startTestIdp,
  type TestIdp,
} from './support/test-idp.ts';

describe('dev-user grant', () => {
  let idp: TestIdp;
  let agent: client.Configuration;

  beforeAll(async () => {
    idp = await startTestIdp();
    agent = await idp.client('mcp-agent');
  });
  afterAll(() => idp.close());

  test('issues an ES256 at+jwt access token for the gateway with tenant, scope, client_id and azp', async () => {
    const response = await devUserToken(agent, { sub: 'alice', tenant: 'acme' });
    expect(response.token_type.toLowerCase()).toBe('bearer');
    expect(response.expires_in).toBe(3600);
    expect(response.scope).toBe('env:provision reports:run records:write');

    const { header, payload } = decode(response.access_token);
    expect(header).toMatchObject({ alg: 'ES256', typ: 'at+jwt', kid: idp.idp.kid });
    expect(payload).toMatchObject({
      iss: idp.issuer,
      sub: 'alice',
      aud: RESOURCES.gateway,
      tenant: 'acme',
      scope: 'env:provision reports:run records:write',
      client_id: 'mcp-agent',
      azp: 'mcp-agent',
    });
    expect(typeof payload.jti).toBe('string');
    expect(payload.exp! - payload.iat!).toBe(3600);
    expect(payload.act).toBeUndefined();
  });

  test('the token verifies against the published JWKS', async () => {
    const { access_token } = await devUserToken(agent, { sub: 'alice', tenant: 'acme' });
    const jwks = createRemoteJWKSet(new URL(`${idp.issuer}/jwks`));
    const { payload } = await jwtVerify(access_token, jwks, {
      issuer: idp.issuer,
      audience: RESOURCES.gateway,
      algorithms: ['ES256'],
      typ: 'at+jwt',
      requiredClaims: ['exp', 'iat', 'jti'],
    });
    expect(payload.sub).toBe('alice');
  });

  test('default scopes leave out tasks:admin, which can be asked for', async () => {
    const response = await devUserToken(agent, {
      sub: 'root',
      tenant: 'acme',
      scope: 'tasks:admin reports:run',
    });
    expect(decode(response.access_token).payload.scope).toBe('tasks:admin reports:run');
  });

  test('ttl sets the lifetime; the token is expired after it', async () => {
    const response = await devUserToken(agent, { sub: 'alice', tenant: 'acme', ttl: '2' });
    expect(response.expires_in).toBe(2);
    const { payload } = decode(response.access_token);
    expect(payload.exp! - payload.iat!).toBe(2);

    const jwks = createRemoteJWKSet(new URL(`${idp.issuer}/jwks`));
    await expect(
      jwtVerify(response.access_token, jwks, { currentDate: new Date((payload.exp! + 1) * 1000) }),
    ).rejects.toBeInstanceOf(joseErrors.JWTExpired);
  });

  test('a ttl above the configured maximum is refused', async () => {
    const error = await oauthError(
      devUserToken(agent, { sub: 'alice', tenant: 'acme', ttl: '7200' }),
    );
    expect(error).toMatchObject({ error: 'invalid_request' });
    expect(error.error_description).toMatch(/ttl/);
  });

  test('a token for another known resource has that audience', async () => {
    const response = await devUserToken(agent, {
      sub: 'alice',
      tenant: 'acme',
      resource: RESOURCES.downstream,
    });
    expect(decode(response.access_token).payload.aud).toBe(RESOURCES.downstream);
  });

  test('an unknown resource is invalid_target', async () => {
    const error = await oauthError(
      devUserToken(agent, { sub: 'alice', tenant: 'acme', resource: 'https://elsewhere.example/' }),
    );
    expect(error.error).toBe('invalid_target');
  });

  test('sub and tenant are required', async () => {
    const error = await oauthError(devUserToken(agent, { sub: 'alice' }));
    expect(error).toMatchObject({
      error: 'invalid_request',
      error_description: 'tenant is required',
    });
  });

  test('a disabled user is refused with a reason, and served again once enabled', async () => {
    expect((await admin(idp, 'disable', { sub: 'bob', tenant: 'acme' })).status).toBe(200);
    const error = await oauthError(devUserToken(agent, { sub: 'bob', tenant: 'acme' }));
    expect(error).toMatchObject({
      error: 'invalid_grant',
      error_description: 'user bob in tenant acme is disabled',
    });
    // Same sub in another tenant is another user.
    await devUserToken(agent, { sub: 'bob', tenant: 'globex' });

    expect((await admin(idp, 'enable', { sub: 'bob', tenant: 'acme' })).status).toBe(200);
    const response = await devUserToken(agent, { sub: 'bob', tenant: 'acme' });
    expect(decode(response.access_token).payload.sub).toBe('bob');
  });

  test('users are created on first use in users.json', async () => {
    await devUserToken(agent, { sub: 'carol', tenant: 'initech' });
    expect(await idp.idp.users.get({ sub: 'carol', tenant: 'initech' })).toMatchObject({
      sub: 'carol',
      tenant: 'initech',
      disabled: false,
    });
  });

  test('client_secret_post authenticates an agent as well', async () => {
    const config = await client.discovery(
      new URL(idp.issuer),
      'mcp-agent-2',
      undefined,
      client.ClientSecretPost(idp.secrets.clientSecrets['mcp-agent-2']),
      { execute: [client.allowInsecureRequests] },
    );
    const response = await devUserToken(config, { sub: 'alice', tenant: 'acme' });
    expect(decode(response.access_token).payload).toMatchObject({
      client_id: 'mcp-agent-2',
      azp: 'mcp-agent-2',
    });
  });

  test('a wrong client secret is invalid_client', async () => {
    const config = await client.discovery(
      new URL(idp.issuer),
      'mcp-agent',
      undefined,
      client.ClientSecretBasic('not-the-secret'),
      { execute: [client.allowInsecureRequests] },
    );
    const error = await oauthError(devUserToken(config, { sub: 'alice', tenant: 'acme' }));
    expect(error.error).toBe('invalid_client');
  });

  test('service clients may not use the dev-user grant', async () => {
    const gateway = await idp.client('mcp-gateway');
    const error = await oauthError(
      client.genericGrantRequest(gateway, DEV_USER_GRANT, { sub: 'alice', tenant: 'acme' }),
    );
    expect(error.error).toMatch(/invalid_request|unauthorized_client/);
  });
});

describe('client credentials', () => {
  let idp: TestIdp;
  beforeAll(async () => {
    idp = await startTestIdp();
  });
  afterAll(() => idp.close());

  test('mcp-worker gets a token for the downstream resource, naming itself and no tenant', async () => {
    const worker = await idp.client('mcp-worker');
    const response = await client.clientCredentialsGrant(worker, {
      resource: RESOURCES.downstream,
      scope: 'records:write',
    });
    const { header, payload } = decode(response.access_token);
    expect(header).toMatchObject({ alg: 'ES256', typ: 'at+jwt' });
    expect(payload).toMatchObject({
      iss: idp.issuer,
      sub: 'mcp-worker',
      aud: RESOURCES.downstream,
      client_id: 'mcp-worker',
      azp: 'mcp-worker',
      scope: 'records:write',
    });
    expect(payload.tenant).toBeUndefined();
  });

  test('an unknown resource is invalid_target', async () => {
    const worker = await idp.client('mcp-worker');
    const error = await oauthError(
      client.clientCredentialsGrant(worker, { resource: 'https://elsewhere.example/' }),
    );
    expect(error.error).toBe('invalid_target');
  });
});
