import * as client from 'openid-client';
import { admin, decode, RESOURCES, startTestIdp, type TestIdp } from './support/test-idp.ts';

/** A browser reduced to what the login needs: cookies, redirects and one form. */
class Browser {
  private readonly cookies = new Map<string, string>();

  async get(url: string): Promise<Response> {
    return this.request(url, { method: 'GET' });
  }

  async postForm(url: string, form: Record<string, string>): Promise<Response> {
    return this.request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(form).toString(),
    });
  }

  private async request(url: string, init: RequestInit): Promise<Response> {
    // Paths of the IdP's cookies do not matter here: every cookie goes with every request.
    const cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const response = await fetch(url, {
      ...init,
      redirect: 'manual',
      headers: { ...(init.headers as Record<string, string>), ...(cookie ? { cookie } : {}) },
    });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq);
      const value = pair!.slice(eq + 1);
      if (value === '' || /expires=Thu, 01 Jan 1970/i.test(line)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return response;
  }
}

const REDIRECT_URI = 'http://127.0.0.1:8765/callback';

/**
 * Follows redirects from the authorization URL, filling the login form once, until the IdP
 * redirects to the client. Returns that callback URL, or the page it stopped on.
 */
async function logIn(
  browser: Browser,
  authorizationUrl: URL,
  user: { username: string; tenant: string },
  redirectUri = REDIRECT_URI,
): Promise<{ callback?: URL; page?: Response }> {
  let url = authorizationUrl.href;
  for (let hops = 0; hops < 10; hops++) {
    let response = await browser.get(url);
    if (response.status === 200) {
      const html = await response.text();
      const action = /<form method="post" action="([^"]+)"/.exec(html)?.[1];
      if (!action) throw new Error(`unexpected page: ${html.slice(0, 200)}`);
      response = await browser.postForm(new URL(action, url).href, user);
    }
    const location = response.headers.get('location');
    if (!location) return { page: response };
    url = new URL(location, url).href;
    if (url.startsWith(redirectUri)) return { callback: new URL(url) };
  }
  throw new Error('too many redirects');
}

describe('authorization code + PKCE with the login form', () => {
  let idp: TestIdp;
  let agent: client.Configuration;

  beforeAll(async () => {
    idp = await startTestIdp();
    agent = await idp.client('mcp-agent');
  });
  afterAll(() => idp.close());

  async function authorizationUrl(scope: string) {
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const url = client.buildAuthorizationUrl(agent, {
      redirect_uri: REDIRECT_URI,
      scope,
      resource: RESOURCES.gateway,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
    });
    return { url, verifier, state };
  }

  test('a person logs in as alice of acme and the client gets her gateway token', async () => {
    const { url, verifier, state } = await authorizationUrl('openid env:provision reports:run');
    const { callback } = await logIn(new Browser(), url, { username: 'alice', tenant: 'acme' });
    expect(callback).toBeDefined();

    const tokens = await client.authorizationCodeGrant(
      agent,
      callback!,
      { pkceCodeVerifier: verifier, expectedState: state },
      { resource: RESOURCES.gateway },
    );
    const { header, payload } = decode(tokens.access_token);
    expect(header).toMatchObject({ alg: 'ES256', typ: 'at+jwt' });
    expect(payload).toMatchObject({
      iss: idp.issuer,
      sub: 'alice',
      tenant: 'acme',
      aud: RESOURCES.gateway,
      scope: 'env:provision reports:run',
      client_id: 'mcp-agent',
      azp: 'mcp-agent',
    });
    expect(tokens.refresh_token).toBeDefined();

    const refreshed = await client.refreshTokenGrant(agent, tokens.refresh_token!, {
      resource: RESOURCES.gateway,
    });
    expect(decode(refreshed.access_token).payload).toMatchObject({ sub: 'alice', tenant: 'acme' });
  });

  test('without PKCE the authorization request is refused', async () => {
    const url = client.buildAuthorizationUrl(agent, {
      redirect_uri: REDIRECT_URI,
      scope: 'env:provision',
      resource: RESOURCES.gateway,
    });
    const response = await new Browser().get(url.href);
    const location = new URL(response.headers.get('location')!);
    expect(location.searchParams.get('error')).toBe('invalid_request');
    expect(location.searchParams.get('error_description')).toMatch(/PKCE/);
  });

  test('a disabled user cannot log in', async () => {
    await admin(idp, 'disable', { sub: 'mallory', tenant: 'acme' });
    const { url } = await authorizationUrl('env:provision');
    const { callback, page } = await logIn(new Browser(), url, {
      username: 'mallory',
      tenant: 'acme',
    });
    expect(callback).toBeUndefined();
    expect(page!.status).toBe(403);
    expect(await page!.text()).toContain('User mallory in tenant acme is disabled.');
  });

  test("a disabled user's refresh token stops working", async () => {
    const { url, verifier, state } = await authorizationUrl('env:provision');
    const { callback } = await logIn(new Browser(), url, { username: 'erin', tenant: 'acme' });
    const tokens = await client.authorizationCodeGrant(
      agent,
      callback!,
      { pkceCodeVerifier: verifier, expectedState: state },
      { resource: RESOURCES.gateway },
    );
    await admin(idp, 'disable', { sub: 'erin', tenant: 'acme' });
    const refused = client.refreshTokenGrant(agent, tokens.refresh_token!, {
      resource: RESOURCES.gateway,
    });
    await expect(refused).rejects.toMatchObject({ error: 'invalid_grant' });
  });

  test('MCP Inspector can register itself and log a user in through its localhost callback', async () => {
    const redirectUri = 'http://localhost:6274/oauth/callback';
    const inspector = await client.dynamicClientRegistration(
      new URL(idp.issuer),
      {
        client_name: 'MCP Inspector',
        redirect_uris: [redirectUri],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      },
      client.None(),
      { execute: [client.allowInsecureRequests] },
    );
    const verifier = client.randomPKCECodeVerifier();
    const url = client.buildAuthorizationUrl(inspector, {
      redirect_uri: redirectUri,
      scope: 'reports:run',
      resource: RESOURCES.gateway,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    });
    const { callback } = await logIn(
      new Browser(),
      url,
      { username: 'frank', tenant: 'globex' },
      redirectUri,
    );
    const tokens = await client.authorizationCodeGrant(
      inspector,
      callback!,
      { pkceCodeVerifier: verifier },
      { resource: RESOURCES.gateway },
    );
    expect(decode(tokens.access_token).payload).toMatchObject({
      sub: 'frank',
      tenant: 'globex',
      scope: 'reports:run',
      client_id: inspector.clientMetadata().client_id,
    });
  });
});
