import {
  discoverAuthorizationServerMetadata,
  discoverOAuthProtectedResourceMetadata,
  extractWWWAuthenticateParams,
} from '@modelcontextprotocol/client';
import { startStack, type Stack } from '../support/stack.ts';

// RFC 9728 protected resource metadata: how an MCP client that got a 401 finds out where to
// get a token for this gateway.

const SCOPES = ['env:provision', 'reports:run', 'records:write', 'tasks:admin'];

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ workers: 0 });
});
afterAll(async () => {
  await stack?.close();
});

test.each([
  ['the path-specific URL', '/.well-known/oauth-protected-resource/mcp'],
  ['the root URL', '/.well-known/oauth-protected-resource'],
])(
  '%s serves the metadata: resource, the dev IdP, the four scopes, header bearer only',
  async (_name, path) => {
    const response = await fetch(`${stack.gatewayUrl}${path}`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    const document = (await response.json()) as Record<string, unknown>;
    expect(document).toMatchObject({
      resource: stack.mcpUrl,
      authorization_servers: [stack.issuer],
      bearer_methods_supported: ['header'],
    });
    expect(document.scopes_supported).toEqual(expect.arrayContaining(SCOPES));
  },
);

test('the metadata is public: no token is needed to read it', async () => {
  const response = await fetch(`${stack.gatewayUrl}/.well-known/oauth-protected-resource/mcp`, {
    headers: { authorization: 'Bearer garbage' },
  });
  expect(response.status).toBe(200);
});

test("the v2 client's discovery helper reads the metadata and names the dev IdP", async () => {
  const metadata = await discoverOAuthProtectedResourceMetadata(stack.mcpUrl);
  expect(metadata.resource).toBe(stack.mcpUrl);
  expect(metadata.authorization_servers).toEqual([stack.issuer]);
  expect(metadata.scopes_supported).toEqual(expect.arrayContaining(SCOPES));
});

test('a client following the 401 challenge reaches the dev IdP authorization server metadata', async () => {
  // The path a real client takes: 401 → resource_metadata → authorization server → its metadata.
  const unauthorized = await fetch(stack.mcpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
  expect(unauthorized.status).toBe(401);
  const { resourceMetadataUrl } = extractWWWAuthenticateParams(unauthorized);
  expect(resourceMetadataUrl?.href).toBe(
    `${stack.gatewayUrl}/.well-known/oauth-protected-resource/mcp`,
  );

  const metadata = await discoverOAuthProtectedResourceMetadata(stack.mcpUrl, {
    resourceMetadataUrl: resourceMetadataUrl!,
  });
  const authorizationServer = metadata.authorization_servers![0]!;
  expect(authorizationServer).toBe(stack.issuer);
  const asMetadata = await discoverAuthorizationServerMetadata(authorizationServer);
  expect(asMetadata?.issuer).toBe(stack.issuer);
  expect(asMetadata?.token_endpoint).toBe(`${stack.issuer}/token`);
  expect(asMetadata?.scopes_supported).toEqual(expect.arrayContaining(SCOPES));
});
