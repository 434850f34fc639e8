import http from 'node:http';
import { gzipSync } from 'node:zlib';
import {
  devIdpSigningKey,
  fetchJwks,
  generateForeignKey,
  hmacWithPublicKey,
  signToken,
  unsecuredToken,
  userClaims,
  type SigningKey,
} from '../support/forge-token.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';

// Issue: "every bad token and bad request gets its specific error, never a 500". Raw HTTP
// against the real stack; after every case the gateway must still answer a good request.

const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: {
    protocolVersion: '2025-11-25',
    capabilities: {},
    clientInfo: { name: 'http-errors-test', version: '1.0.0' },
  },
};

/** The per-request envelope of a 2026-07-28 request (as the v2 client sends it). */
const MODERN_META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'http-errors-test', version: '1.0.0' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

type Reply = { status: number; headers: Headers; text: string; json: any };

async function send(
  stack: Stack,
  options: {
    token?: string;
    body?: string | object;
    method?: string;
    headers?: Record<string, string>;
  } = {},
): Promise<Reply> {
  const method = options.method ?? 'POST';
  const body = options.body ?? INITIALIZE;
  const response = await fetch(stack.mcpUrl, {
    method,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
      ...options.headers,
    },
    ...(method === 'POST' ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json };
}

/** node:http, because fetch sets Host from the URL. */
function sendWithHost(
  url: string,
  host: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'POST', headers: { ...headers, host } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    request.on('error', reject);
    request.end(JSON.stringify(INITIALIZE));
  });
}

/** `Bearer a="b", c="d"` → { scheme: 'Bearer', params: { a: 'b', c: 'd' } }. */
function parseChallenge(header: string | null): { scheme: string; params: Record<string, string> } {
  expect(header).toBeTruthy();
  const scheme = /^\S+/.exec(header!)![0];
  const params: Record<string, string> = {};
  for (const m of header!.slice(scheme.length).matchAll(/([\w-]+)="((?:[^"\\]|\\.)*)"/g)) {
    params[m[1]!] = m[2]!.replace(/\\(.)/g, '$1');
  }
  return { scheme, params };
}

function expectInvalidToken(reply: Reply, stack: Stack, description: RegExp) {
  expect(reply.status).toBe(401);
  const { scheme, params } = parseChallenge(reply.headers.get('www-authenticate'));
  expect(scheme).toBe('Bearer');
  expect(params.error).toBe('invalid_token');
  expect(params.error_description).toMatch(description);
  expect(params.resource_metadata).toBe(
    `${stack.gatewayUrl}/.well-known/oauth-protected-resource/mcp`,
  );
  expect(reply.json).toMatchObject({ error: 'invalid_token' });
  expect(reply.json.error_description).toMatch(description);
}

async function expectGatewayServes(stack: Stack, token: string) {
  const reply = await send(stack, { token });
  expect(reply.status).toBe(200);
  expect(reply.json.result.serverInfo.name).toBe('mcp-task-gateway');
}

describe('with the default clock tolerance', () => {
  let stack: Stack;
  let goodToken: string;
  let idpKey: SigningKey;
  let foreignKey: SigningKey;
  const claims = (overrides: Record<string, unknown> = {}) => ({
    ...userClaims({ issuer: stack.issuer, audience: stack.mcpUrl }),
    ...overrides,
  });

  beforeAll(async () => {
    stack = await startStack({ workers: 0 });
    goodToken = await stack.token('alice', 'acme');
    idpKey = await devIdpSigningKey(stack.issuer);
    foreignKey = await generateForeignKey();
  });
  afterAll(async () => {
    await stack?.close();
  });
  afterEach(async () => {
    await expectGatewayServes(stack, goodToken);
  });

  describe('credentials', () => {
    test('a request without Authorization gets 401 and a bare Bearer challenge naming the resource metadata', async () => {
      const reply = await send(stack);
      expect(reply.status).toBe(401);
      const header = reply.headers.get('www-authenticate')!;
      expect(header.startsWith('Bearer')).toBe(true);
      expect(header).toContain(
        `resource_metadata="${stack.gatewayUrl}/.well-known/oauth-protected-resource/mcp"`,
      );
      // RFC 6750 §3.1: no error information when the request carried no credentials.
      expect(header).not.toContain('error=');
    });

    test('a Basic Authorization header counts as no credentials: 401 without an error code', async () => {
      const reply = await send(stack, { headers: { authorization: 'Basic xyz' } });
      expect(reply.status).toBe(401);
      const { scheme, params } = parseChallenge(reply.headers.get('www-authenticate'));
      expect(scheme).toBe('Bearer');
      expect(params.error).toBeUndefined();
      expect(params.resource_metadata).toBeDefined();
    });

    test('"Bearer a b" is a malformed Authorization header: 400 invalid_request', async () => {
      const reply = await send(stack, { headers: { authorization: 'Bearer a b' } });
      expect(reply.status).toBe(400);
      const { params } = parseChallenge(reply.headers.get('www-authenticate'));
      expect(params.error).toBe('invalid_request');
      expect(params.resource_metadata).toBeDefined();
      expect(reply.json).toMatchObject({ error: 'invalid_request' });
    });

    test('a bearer value that is not a JWT gets 401 invalid_token', async () => {
      expectInvalidToken(await send(stack, { token: 'not-a-jwt' }), stack, /not a compact JWS/);
    });
  });

  describe('tokens from the real IdP', () => {
    test('a token for another audience (the downstream) gets 401 invalid_token', async () => {
      const token = await stack.token('alice', 'acme', { resource: stack.downstreamUrl });
      expectInvalidToken(await send(stack, { token }), stack, /audience is not this resource/);
    });

    test('a client-credentials token for the gateway has no tenant and gets 401 invalid_token naming the tenant claim', async () => {
      const secret = stack.secrets.clientSecrets['mcp-gateway'];
      const response = await fetch(`${stack.issuer}/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`mcp-gateway:${secret}`).toString('base64')}`,
        },
        body: new URLSearchParams({
          grant_type: 'client_credentials',
          resource: stack.mcpUrl,
          scope: 'reports:run',
        }),
      });
      const { access_token: token } = (await response.json()) as { access_token: string };
      expect(token).toBeTruthy();
      expectInvalidToken(await send(stack, { token }), stack, /missing tenant claim/);
    });

    test('a real token with a tampered payload gets 401 invalid_token (bad signature)', async () => {
      const [header, payload, signature] = goodToken.split('.');
      const claimsOf = JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8'));
      const forgedPayload = Buffer.from(JSON.stringify({ ...claimsOf, sub: 'mallory' })).toString(
        'base64url',
      );
      const token = `${header}.${forgedPayload}.${signature}`;
      expectInvalidToken(await send(stack, { token }), stack, /signature is invalid/);
    });
  });

  describe('forged tokens', () => {
    test('a token from another issuer signed with its own key gets 401 invalid_token (no known key)', async () => {
      const token = await signToken(claims({ iss: 'https://evil.example' }), foreignKey);
      expectInvalidToken(await send(stack, { token }), stack, /no known key matches/);
    });

    test('a token signed with the trusted key but naming another issuer gets 401 invalid_token', async () => {
      const token = await signToken(claims({ iss: 'https://evil.example' }), idpKey);
      expectInvalidToken(await send(stack, { token }), stack, /issuer is not accepted/);
    });

    test('an unsecured token (alg none) gets 401 invalid_token', async () => {
      const token = unsecuredToken(claims(), { kid: idpKey.kid });
      expectInvalidToken(await send(stack, { token }), stack, /algorithm is not allowed/);
    });

    test('HS256 keyed with the IdP public JWK (algorithm confusion) gets 401 invalid_token', async () => {
      const { keys } = await fetchJwks(stack.issuer);
      const token = await hmacWithPublicKey(claims(), keys[0]!);
      expectInvalidToken(await send(stack, { token }), stack, /algorithm is not allowed/);
    });

    test('a token naming an unknown kid gets 401 invalid_token', async () => {
      const token = await signToken(claims(), foreignKey, { kid: 'unknown-kid' });
      expectInvalidToken(await send(stack, { token }), stack, /no known key matches/);
    });

    test("a token naming the IdP's kid but signed with another key gets 401 invalid_token", async () => {
      const token = await signToken(claims(), foreignKey, { kid: idpKey.kid });
      expectInvalidToken(await send(stack, { token }), stack, /signature is invalid/);
    });

    test('a trusted-key token without a tenant claim gets 401 invalid_token', async () => {
      const token = await signToken(claims({ tenant: undefined }), idpKey);
      expectInvalidToken(await send(stack, { token }), stack, /missing tenant claim/);
    });

    test('a token whose nbf is an hour ahead gets 401 invalid_token (not valid yet)', async () => {
      const token = await signToken(claims({ nbf: Math.floor(Date.now() / 1000) + 3600 }), idpKey);
      expectInvalidToken(await send(stack, { token }), stack, /not valid yet/);
    });

    test('a token issued an hour in the future (iat) gets 401 invalid_token', async () => {
      const token = await signToken(claims({ iat: Math.floor(Date.now() / 1000) + 3600 }), idpKey);
      expectInvalidToken(await send(stack, { token }), stack, /.iat. is in the future/);
    });

    test('a token without exp gets 401 invalid_token instead of living forever', async () => {
      const token = await signToken(claims({ exp: undefined }), idpKey);
      expectInvalidToken(await send(stack, { token }), stack, /missing claim .exp./);
    });

    test('a signed JWT that is not typed as an access token (typ JWT) gets 401 invalid_token', async () => {
      const token = await signToken(claims(), idpKey, { typ: 'JWT' });
      expectInvalidToken(await send(stack, { token }), stack, /not an access token/);
    });

    test('a forged token that carries every right claim passes (the forgery helper is sound)', async () => {
      // Guards the tests above: each failed for the defect it names, not for the helper.
      const token = await signToken(claims(), idpKey);
      expect((await send(stack, { token })).status).toBe(200);
    });
  });

  describe('request guards', () => {
    test('a foreign Origin with a valid token gets 403', async () => {
      const reply = await send(stack, {
        token: goodToken,
        headers: { origin: 'http://evil.example' },
      });
      expect(reply.status).toBe(403);
      expect(reply.json.error.message).toMatch(/Origin not allowed/);
    });

    test('an allowed Origin (MCP Inspector on localhost:6274) passes', async () => {
      const reply = await send(stack, {
        token: goodToken,
        headers: { origin: 'http://localhost:6274' },
      });
      expect(reply.status).toBe(200);
    });

    test.each([
      'http://localhost:5173',
      'http://127.0.0.1:8080',
      'http://[::1]:3000',
      'http://localhost',
    ])(
      'with the gateway on loopback and ALLOWED_ORIGINS unset, a loopback Origin on any port passes (%s)',
      async (origin) => {
        const reply = await send(stack, { token: goodToken, headers: { origin } });
        expect(reply.status).toBe(200);
      },
    );

    test.each([
      'http://localhost.evil.example',
      'http://evil.example:6274',
      'http://127.0.0.1.nip.io:3000',
      'null',
      'http://localhost:3000/path',
    ])('a non-loopback or malformed Origin is still refused by default (%s)', async (origin) => {
      const reply = await send(stack, { token: goodToken, headers: { origin } });
      expect(reply.status).toBe(403);
      expect(reply.json.error.message).toMatch(/Origin not allowed/);
    });

    test('a request without Origin (a non-browser client) passes', async () => {
      expect((await send(stack, { token: goodToken })).status).toBe(200);
    });

    test('a foreign Host header (DNS rebinding) gets 403', async () => {
      const reply = await sendWithHost(stack.mcpUrl, 'evil.example', {
        authorization: `Bearer ${goodToken}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      });
      expect(reply.status).toBe(403);
      expect(reply.body).toMatch(/Host header not allowed/);
    });

    test('a Host header the gateway serves (localhost on any port) passes', async () => {
      const reply = await sendWithHost(stack.mcpUrl, 'localhost:1234', {
        authorization: `Bearer ${goodToken}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      });
      expect(reply.status).toBe(200);
    });
  });

  describe('bodies and methods', () => {
    test('a body that is not JSON gets 400 with JSON-RPC -32700', async () => {
      const reply = await send(stack, { token: goodToken, body: '{"jsonrpc": "2.0", ' });
      expect(reply.status).toBe(400);
      expect(reply.json).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32700 } });
    });

    test.each([
      ['an object without jsonrpc', '{"foo":1}'],
      ['an empty batch', '[]'],
      ['a bare string', '"x"'],
      ['JSON-RPC 1.0', '{"jsonrpc":"1.0","method":"x"}'],
      ['a non-object params', '{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}'],
      ['a batch holding a non-message', `[${JSON.stringify(INITIALIZE)}, 1]`],
    ])('valid JSON that is not JSON-RPC (%s) gets 400 with -32600', async (_name, body) => {
      const reply = await send(stack, { token: goodToken, body });
      expect(reply.status).toBe(400);
      expect(reply.json).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } });
    });

    const PING = (id: number) => ({ jsonrpc: '2.0', id, method: 'ping' });
    test.each(['2025-06-18', '2025-11-25'])(
      'a JSON-RPC batch under MCP-Protocol-Version %s (batches were removed in 2025-06-18) gets 400 -32600',
      async (version) => {
        const reply = await send(stack, {
          token: goodToken,
          body: [PING(1), PING(2)],
          headers: { 'mcp-protocol-version': version },
        });
        expect(reply.status).toBe(400);
        expect(reply.json).toMatchObject({
          jsonrpc: '2.0',
          id: null,
          error: {
            code: -32600,
            message: expect.stringMatching(
              new RegExp(`batches are not part of MCP ${version} \\(removed in 2025-06-18\\)`),
            ),
          },
        });
      },
    );

    test('a batch of 2026-07-28 requests gets 400 -32600, by header or by envelope alone', async () => {
      const modern = (id: number) => ({ ...PING(id), params: { _meta: MODERN_META } });
      for (const headers of [
        { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'ping' },
        {} as Record<string, string>,
      ]) {
        const reply = await send(stack, {
          token: goodToken,
          body: [modern(1), modern(2)],
          headers,
        });
        expect(reply.status).toBe(400);
        expect(reply.json.error).toMatchObject({
          code: -32600,
          message: expect.stringMatching(/batches are not part of MCP 2026-07-28/),
        });
      }
    });

    test('initialize inside a batch gets 400 -32600 even on 2025-03-26', async () => {
      const reply = await send(stack, {
        token: goodToken,
        body: [INITIALIZE, PING(2)],
        headers: { 'mcp-protocol-version': '2025-03-26' },
      });
      expect(reply.status).toBe(400);
      expect(reply.json.error).toMatchObject({
        code: -32600,
        message: expect.stringMatching(/initialize must not be part of a JSON-RPC batch/),
      });
    });

    test.each([
      ['MCP-Protocol-Version 2025-03-26', { 'mcp-protocol-version': '2025-03-26' }],
      ['no MCP-Protocol-Version (2025-03-26 assumed)', {}],
    ])('a batch under %s is answered element by element', async (_name, headers) => {
      const reply = await send(stack, {
        token: goodToken,
        body: [PING(1), { jsonrpc: '2.0', id: 2, method: 'tools/list' }],
        headers,
      });
      expect(reply.status).toBe(200);
      expect(Array.isArray(reply.json)).toBe(true);
      const byId = Object.fromEntries((reply.json as any[]).map((m) => [m.id, m]));
      expect(byId[1]).toMatchObject({ result: {} });
      expect(byId[2].result.tools.map((t: { name: string }) => t.name)).toContain('whoami');
    });

    test.each([
      ['text/plain', { 'content-type': 'text/plain' }],
      [
        'JSON in Latin-1 (JSON is UTF-8)',
        { 'content-type': 'application/json; charset=iso-8859-1' },
      ],
      ['an unknown Content-Encoding', { 'content-encoding': 'x-unknown' }],
    ])('a body sent as %s gets 415', async (_name, headers) => {
      const reply = await send(stack, { token: goodToken, headers });
      expect(reply.status).toBe(415);
      expect(reply.json.error.code).toBe(-32600);
    });

    test('a 2 MiB body (over MAX_BODY_BYTES) gets 413', async () => {
      const body = JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'ping',
        params: { pad: 'x'.repeat(2 * 1024 * 1024) },
      });
      const reply = await send(stack, { token: goodToken, body });
      expect(reply.status).toBe(413);
      expect(reply.json.error.code).toBe(-32600);
    });

    test('a small gzip body that inflates past MAX_BODY_BYTES gets 413', async () => {
      const json = JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'ping',
        params: { pad: ' '.repeat(8 * 1024 * 1024) },
      });
      const compressed = gzipSync(json);
      expect(compressed.length).toBeLessThan(64 * 1024);
      const response = await fetch(stack.mcpUrl, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-encoding': 'gzip',
          accept: 'application/json, text/event-stream',
          authorization: `Bearer ${goodToken}`,
        },
        body: compressed,
      });
      expect(response.status).toBe(413);
    });

    test('100,000 nested arrays get a 400, not a 500', async () => {
      const body = '['.repeat(100_000) + ']'.repeat(100_000);
      const reply = await send(stack, { token: goodToken, body });
      expect(reply.status).toBe(400);
      expect(reply.json.error.code).toBe(-32600);
    });

    const nested = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);

    test('a 2025 tools/call whose arguments nest 10,000 deep gets 400, not a 500', async () => {
      const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{"x":${nested(10_000)}}}}`;
      const reply = await send(stack, { token: goodToken, body });
      expect(reply.status).toBe(400);
      expect(reply.json.error).toMatchObject({
        code: -32600,
        message: expect.stringMatching(/nested deeper/),
      });
    });

    test('a 2026-07-28 tools/call whose arguments nest 10,000 deep gets 400, not a 500', async () => {
      const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{"x":${nested(10_000)}},"_meta":${JSON.stringify(MODERN_META)}}}`;
      const reply = await send(stack, {
        token: goodToken,
        body,
        headers: {
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': 'tools/call',
          'mcp-name': 'whoami',
        },
      });
      expect(reply.status).toBe(400);
      expect(reply.json.error.code).toBe(-32600);
    });

    test('moderately nested arguments (100 levels) still reach the tool', async () => {
      const body = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"whoami","arguments":{"x":${nested(100)}}}}`;
      const reply = await send(stack, { token: goodToken, body });
      // whoami takes no arguments: the tool's own validation answers, in-band.
      expect(reply.status).toBe(200);
      expect(reply.json).toMatchObject({ id: 7, result: { isError: true } });
    });

    test('an unknown method on the 2025 path gets JSON-RPC -32601 in a 200 reply (stateless: no initialize needed first)', async () => {
      const reply = await send(stack, {
        token: goodToken,
        body: { jsonrpc: '2.0', id: 1, method: 'nope' },
      });
      expect(reply.status).toBe(200);
      expect(reply.json).toMatchObject({ jsonrpc: '2.0', id: 1, error: { code: -32601 } });
    });

    test('an unknown method on the 2026-07-28 path gets -32601 with HTTP 404 (the v2 SDK maps ladder errors to statuses)', async () => {
      const reply = await send(stack, {
        token: goodToken,
        body: { jsonrpc: '2.0', id: 1, method: 'nope', params: { _meta: MODERN_META } },
        headers: { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'nope' },
      });
      expect(reply.status).toBe(404);
      expect(reply.json).toMatchObject({ jsonrpc: '2.0', id: 1, error: { code: -32601 } });
    });

    test.each(['GET', 'DELETE'])('%s /mcp gets 405 with Allow: POST', async (method) => {
      const reply = await send(stack, { token: goodToken, method });
      expect(reply.status).toBe(405);
      expect(reply.headers.get('allow')).toBe('POST');
      expect(reply.json.error.code).toBe(-32600);
    });
  });

  describe('input that would reach PostgreSQL malformed', () => {
    const cursorOf = (c: unknown) => Buffer.from(JSON.stringify(c)).toString('base64url');
    const noDriverText = (text: string) =>
      expect(text).not.toMatch(/syntax|timestamp|constraint|bigint|out of range|violates/i);

    test.each([
      ['a date PostgreSQL cannot read', cursorOf({ at: '1 1', id: 'a'.repeat(32) })],
      ['a year out of range', cursorOf({ at: '+275760-09-13T00:00:00.000Z', id: 'a'.repeat(32) })],
      ['a task id that is none', cursorOf({ at: new Date().toISOString(), id: 'x' })],
      ['not base64 JSON', 'not-a-cursor!'],
    ])(
      'a forged tasks/list cursor (%s) gets -32602 Invalid cursor, never driver text',
      async (_n, cursor) => {
        const reply = await send(stack, {
          token: goodToken,
          body: { jsonrpc: '2.0', id: 1, method: 'tasks/list', params: { cursor } },
        });
        expect(reply.status).toBe(200);
        expect(reply.json.error).toMatchObject({
          code: -32602,
          message: expect.stringMatching(/Invalid cursor/),
        });
        noDriverText(reply.text);
        const jobs = await send(stack, {
          token: goodToken,
          body: {
            jsonrpc: '2.0',
            id: 2,
            method: 'tools/call',
            params: { name: 'list_jobs', arguments: { cursor } },
          },
        });
        expect(jobs.json.result).toMatchObject({
          isError: true,
          structuredContent: { error: 'invalid_params' },
        });
        noDriverText(jobs.text);
      },
    );

    test.each([-5, 0.5, 0, 1.0000001])(
      'a 2025-11-25 task.ttl of %s gets -32602 naming the rule, before any task or token exchange',
      async (ttl) => {
        const before = await sql(stack.db.url, 'SELECT count(*)::int AS n FROM app.tasks');
        const reply = await send(stack, {
          token: goodToken,
          body: {
            jsonrpc: '2.0',
            id: 3,
            method: 'tools/call',
            params: {
              name: 'generate_report',
              arguments: { report: `ttl-${ttl}`, rows: 1 },
              task: { ttl },
            },
          },
        });
        expect(reply.json.error).toMatchObject({
          code: -32602,
          message: expect.stringMatching(/task\.ttl must be a positive integer/),
        });
        noDriverText(reply.text);
        expect(await sql(stack.db.url, 'SELECT count(*)::int AS n FROM app.tasks')).toEqual(before);
      },
    );

    test.each(['evil@127.0.0.1', 'evil@127.0.0.1:1234', '127.0.0.1/x', '127.0.0.1?x', 'a b'])(
      'a Host header that is not host[:port] (%s) gets 403, not a 500',
      async (host) => {
        const reply = await sendWithHost(stack.mcpUrl, host, {
          authorization: `Bearer ${goodToken}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        });
        expect(reply.status).toBe(403);
        expect(reply.body).toMatch(/Host header not allowed/);
      },
    );

    test.each([
      ['a NUL', '{"subject":"a\\u0000b"}'],
      ['a lone surrogate', '{"subject":"\\ud800"}'],
      ['a lone surrogate in the reason', '{"subject":"carl","reason":"x\\udc00"}'],
    ])(
      'the admin API answers a subject or reason with %s 400 invalid_request, not a 500',
      async (_n, body) => {
        const admin = await stack.token('ada', 'acme', { scope: 'tasks:admin' });
        for (const action of ['revoke', 'restore']) {
          const r = await fetch(`${stack.gatewayUrl}/admin/principals/${action}`, {
            method: 'POST',
            headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
            body,
          });
          expect(r.status).toBe(400);
          expect(await r.json()).toMatchObject({
            error: 'invalid_request',
            error_description: expect.stringMatching(/U\+0000 or unpaired surrogates/),
          });
        }
      },
    );
  });

  describe('scopes', () => {
    test('tools/call of a tool whose scope the token lacks gets 403 insufficient_scope naming the scope', async () => {
      const token = await stack.token('alice', 'acme', { scope: 'reports:run' });
      const reply = await send(stack, {
        token,
        body: {
          jsonrpc: '2.0',
          id: 2,
          method: 'tools/call',
          params: {
            name: 'provision_test_environment',
            arguments: { branch: 'main', services: ['api'] },
          },
        },
      });
      expect(reply.status).toBe(403);
      const { scheme, params } = parseChallenge(reply.headers.get('www-authenticate'));
      expect(scheme).toBe('Bearer');
      expect(params.error).toBe('insufficient_scope');
      expect(params.scope).toBe('env:provision');
      expect(params.resource_metadata).toBe(
        `${stack.gatewayUrl}/.well-known/oauth-protected-resource/mcp`,
      );
      expect(reply.json).toMatchObject({ error: 'insufficient_scope', scope: 'env:provision' });
    });

    test('the same token may call a tool that needs no scope', async () => {
      const token = await stack.token('alice', 'acme', { scope: 'reports:run' });
      const reply = await send(stack, {
        token,
        body: {
          jsonrpc: '2.0',
          id: 3,
          method: 'tools/call',
          params: { name: 'whoami', arguments: {} },
        },
      });
      expect(reply.status).toBe(200);
      expect(reply.json.result.structuredContent).toMatchObject({
        subject: 'alice',
        scopes: ['reports:run'],
      });
    });
  });

  describe('health', () => {
    test('/healthz answers 200', async () => {
      const response = await fetch(`${stack.gatewayUrl}/healthz`);
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ ok: true });
    });

    test('/readyz answers 200 with the database and the signing keys ready', async () => {
      const response = await fetch(`${stack.gatewayUrl}/readyz`);
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ ok: true, checks: { database: true, keys: true } });
    });
  });
});

describe('with no clock tolerance', () => {
  let stack: Stack;
  let goodToken: string;

  beforeAll(async () => {
    stack = await startStack({ workers: 0, env: { AUTH_CLOCK_TOLERANCE_SECONDS: '0' } });
    goodToken = await stack.token('alice', 'acme');
  });
  afterAll(async () => {
    await stack?.close();
  });
  afterEach(async () => {
    await expectGatewayServes(stack, goodToken);
  });

  test('an expired token from the real IdP gets 401 invalid_token saying it expired', async () => {
    const token = await stack.token('alice', 'acme', { ttl: 60 });
    const { exp } = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'));
    // jose: expired once exp <= now (tolerance 0). Valid now; then the gateway's clock moves
    // just past that second.
    expect((await send(stack, { token })).status).not.toBe(401);
    stack.clock.advance(Math.max(0, exp * 1000 - Date.now()) + 1100);
    try {
      expectInvalidToken(await send(stack, { token }), stack, /expired/);
    } finally {
      stack.clock.reset();
    }
  });
});
