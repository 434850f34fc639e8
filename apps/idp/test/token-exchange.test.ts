import * as client from 'openid-client';
import { TOKEN_TYPE_ACCESS_TOKEN, TOKEN_TYPE_JWT } from '../src/grant-types.ts';
import {
  admin,
  decode,
  devUserToken,
  exchangeToken,
  oauthError,
  RESOURCES,
  startTestIdp,
  type TestIdp,
} from './support/test-idp.ts';

describe('token exchange (RFC 8693)', () => {
  let idp: TestIdp;
  let agent: client.Configuration;
  let gateway: client.Configuration;
  let worker: client.Configuration;
  // The IdP's clock: real time plus what a test moves it forward by.
  let aheadMs = 0;
  afterEach(() => {
    aheadMs = 0;
  });

  beforeAll(async () => {
    idp = await startTestIdp({ now: () => Date.now() + aheadMs });
    [agent, gateway, worker] = await Promise.all([
      idp.client('mcp-agent'),
      idp.client('mcp-gateway'),
      idp.client('mcp-worker'),
    ]);
  });
  afterAll(() => idp.close());

  const userToken = async (params: Record<string, string> = {}) =>
    (await devUserToken(agent, { sub: 'alice', tenant: 'acme', ...params })).access_token;

  /** What the gateway does at task creation: a delegation to the worker, narrowed. */
  const delegation = async (subjectToken: string, params: Record<string, string> = {}) =>
    exchangeToken(gateway, {
      subject_token: subjectToken,
      subject_token_type: TOKEN_TYPE_ACCESS_TOKEN,
      resource: RESOURCES.worker,
      scope: 'env:provision',
      ...params,
    });

  test('the gateway trades a user token for a narrowed delegation to the worker, acting for the user', async () => {
    const subject = await userToken();
    const response = await delegation(subject);
    expect(response).toMatchObject({
      issued_token_type: TOKEN_TYPE_ACCESS_TOKEN,
      scope: 'env:provision',
    });
    expect(response.token_type.toLowerCase()).toBe('bearer');

    const { header, payload } = decode(response.access_token);
    expect(header).toMatchObject({ alg: 'ES256', typ: 'at+jwt', kid: idp.idp.kid });
    expect(payload).toMatchObject({
      iss: idp.issuer,
      sub: 'alice',
      tenant: 'acme',
      aud: RESOURCES.worker,
      scope: 'env:provision',
      client_id: 'mcp-gateway',
      azp: 'mcp-gateway',
      act: { sub: 'mcp-gateway' },
    });
    // Its lifetime is no longer than the user token's (compared as lifetimes: the two are
    // issued in different seconds when the clock ticks in between).
    const user = decode(subject).payload;
    expect(payload.exp! - payload.iat!).toBeLessThanOrEqual(user.exp! - user.iat!);
  });

  test('the worker, with its own client token as actor, gets a downstream token with nested act', async () => {
    const { access_token: delegated } = await delegation(await userToken());
    const { access_token: actorToken } = await client.clientCredentialsGrant(worker, {
      resource: RESOURCES.worker,
    });
    const response = await exchangeToken(worker, {
      subject_token: delegated,
      subject_token_type: TOKEN_TYPE_ACCESS_TOKEN,
      actor_token: actorToken,
      actor_token_type: TOKEN_TYPE_ACCESS_TOKEN,
      audience: RESOURCES.downstream,
      ttl: '300',
    });
    expect(response.expires_in).toBe(300);
    expect(decode(response.access_token).payload).toMatchObject({
      sub: 'alice',
      tenant: 'acme',
      aud: RESOURCES.downstream,
      scope: 'env:provision',
      client_id: 'mcp-worker',
      azp: 'mcp-worker',
      act: { sub: 'mcp-worker', act: { sub: 'mcp-gateway' } },
    });
  });

  test('without scope the exchanged token keeps the subject token scopes', async () => {
    const response = await delegation(await userToken({ scope: 'reports:run records:write' }), {
      scope: '',
      subject_token_type: TOKEN_TYPE_JWT,
    });
    expect(response.scope).toBe('reports:run records:write');
  });

  test('asking for a scope the subject token does not hold is invalid_scope', async () => {
    const error = await oauthError(
      delegation(await userToken({ scope: 'reports:run' }), { scope: 'env:provision' }),
    );
    expect(error).toMatchObject({
      error: 'invalid_scope',
      error_description: 'scope env:provision is not held by the subject_token',
    });
  });

  test('the lifetime of an ordinary exchange is capped by the subject token remaining lifetime', async () => {
    const subject = await userToken({ ttl: '30' });
    const response = await exchangeToken(agent, {
      subject_token: subject,
      subject_token_type: TOKEN_TYPE_ACCESS_TOKEN,
      resource: RESOURCES.downstream,
      ttl: '3600',
    });
    expect(response.expires_in).toBeLessThanOrEqual(30);
    expect(decode(response.access_token).payload.exp).toBeLessThanOrEqual(
      decode(subject).payload.exp!,
    );
  });

  test('a task-bound delegation to the worker may outlive the subject token, up to the requested ttl', async () => {
    const subject = await userToken({ ttl: '30' });
    const response = await delegation(subject, { ttl: '7200' });
    expect(response.expires_in).toBe(7200);
    expect(decode(response.access_token).payload.exp).toBeGreaterThan(decode(subject).payload.exp!);
  });

  test('each service client exchanges only for its own hop: the worker for the downstream, the gateway for the worker', async () => {
    const { access_token: delegated } = await delegation(await userToken());
    for (const target of [RESOURCES.gateway, RESOURCES.worker]) {
      const error = await oauthError(
        exchangeToken(worker, {
          subject_token: delegated,
          subject_token_type: TOKEN_TYPE_ACCESS_TOKEN,
          resource: target,
        }),
      );
      expect(error).toMatchObject({
        error: 'invalid_target',
        error_description: `mcp-worker may not exchange tokens for ${JSON.stringify(target)}`,
      });
    }
    for (const target of [RESOURCES.gateway, RESOURCES.downstream]) {
      expect(await oauthError(delegation(await userToken(), { resource: target }))).toMatchObject({
        error: 'invalid_target',
      });
    }
  });

  test('exchange targets are configuration per client: a widened worker may reach a second target', async () => {
    const widened = await startTestIdp({
      exchangeTargets: { 'mcp-worker': [RESOURCES.downstream, RESOURCES.gateway] },
    });
    try {
      const [a, g, w] = await Promise.all([
        widened.client('mcp-agent'),
        widened.client('mcp-gateway'),
        widened.client('mcp-worker'),
      ]);
      const subject = (await devUserToken(a, { sub: 'alice', tenant: 'acme' })).access_token;
      const { access_token: delegated } = await exchangeToken(g, {
        subject_token: subject,
        subject_token_type: TOKEN_TYPE_ACCESS_TOKEN,
        resource: RESOURCES.worker,
      });
      const response = await exchangeToken(w, {
        subject_token: delegated,
        subject_token_type: TOKEN_TYPE_ACCESS_TOKEN,
        resource: RESOURCES.gateway,
      });
      expect(decode(response.access_token).payload).toMatchObject({ aud: RESOURCES.gateway });
      await expect(
        startTestIdp({ exchangeTargets: { 'mcp-worker': ['https://elsewhere.example'] } }),
      ).rejects.toThrow(/no known resource/);
    } finally {
      await widened.close();
    }
  });

  test('an unknown audience is invalid_target and says so', async () => {
    const error = await oauthError(
      delegation(await userToken(), { resource: '', audience: 'https://elsewhere.example/api' }),
    );
    expect(error.error).toBe('invalid_target');
    expect(error.error_description).toMatch(/unknown audience/);
  });

  test('exactly one of resource and audience is required', async () => {
    const subject = await userToken();
    expect(await oauthError(delegation(subject, { audience: RESOURCES.downstream }))).toMatchObject(
      {
        error: 'invalid_request',
      },
    );
    expect(await oauthError(delegation(subject, { resource: '' }))).toMatchObject({
      error: 'invalid_request',
      error_description: 'resource or audience is required',
    });
  });

  test('a disabled user is refused', async () => {
    const subject = (await devUserToken(agent, { sub: 'dave', tenant: 'acme' })).access_token;
    await admin(idp, 'disable', { sub: 'dave', tenant: 'acme' });
    const error = await oauthError(delegation(subject));
    expect(error).toMatchObject({
      error: 'invalid_grant',
      error_description: 'user dave in tenant acme is disabled',
    });
  });

  test('an expired subject token is refused', async () => {
    const subject = await userToken({ ttl: '1' });
    aheadMs = 2100;
    const error = await oauthError(delegation(subject));
    expect(error).toMatchObject({
      error: 'invalid_grant',
      error_description: 'subject_token has expired',
    });
  });

  test('a subject token that is not from this issuer is refused', async () => {
    const subject = await userToken();
    const [h, p] = subject.split('.');
    const forged = `${h}.${p}.${Buffer.from('not a signature').toString('base64url')}`;
    const error = await oauthError(delegation(forged));
    expect(error.error).toBe('invalid_grant');
    expect(error.error_description).toMatch(/not a valid access token/);
  });

  test('an actor_token of another client is refused', async () => {
    const { access_token: delegated } = await delegation(await userToken());
    const { access_token: gatewayToken } = await client.clientCredentialsGrant(gateway, {
      resource: RESOURCES.worker,
    });
    const error = await oauthError(
      exchangeToken(worker, {
        subject_token: delegated,
        subject_token_type: TOKEN_TYPE_ACCESS_TOKEN,
        actor_token: gatewayToken,
        actor_token_type: TOKEN_TYPE_ACCESS_TOKEN,
        resource: RESOURCES.downstream,
      }),
    );
    expect(error).toMatchObject({
      error: 'invalid_grant',
      error_description:
        'actor_token must be a client credentials token of the requesting client mcp-worker',
    });
  });

  test('a client cannot trade a token that was neither issued to it nor sent to the resource it operates', async () => {
    // A user token for the gateway, presented by the worker.
    const error = await oauthError(
      exchangeToken(worker, {
        subject_token: await userToken(),
        subject_token_type: TOKEN_TYPE_ACCESS_TOKEN,
        resource: RESOURCES.downstream,
      }),
    );
    expect(error.error).toBe('invalid_grant');
    expect(error.error_description).toMatch(/issued neither to mcp-worker/);
  });

  test('a client credentials token is not a user subject', async () => {
    const { access_token: own } = await client.clientCredentialsGrant(gateway, {
      resource: RESOURCES.gateway,
    });
    const error = await oauthError(delegation(own));
    expect(error).toMatchObject({ error: 'invalid_grant' });
    expect(error.error_description).toMatch(/no tenant claim/);
  });
});
