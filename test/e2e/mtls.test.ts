import { createHash, X509Certificate } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import https from 'node:https';
import path from 'node:path';
import { ConfigError } from '@mtg/config';
import { loadTls } from '../../apps/gateway/src/tls.ts';
import {
  createTestPki,
  forwardedCert,
  mcpRequest,
  type Issued,
  type TestPki,
} from '../support/certs.ts';
import { devIdpSigningKey, signToken, userClaims } from '../support/forge-token.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';

// JSON this time (the other e2e test uses YAML): the loader picks the syntax by extension.
const POLICY = {
  workloads: [
    { id: 'mcp-agent', tools: ['*'] },
    { id: 'mcp-agent-2', tools: [] },
    {
      id: 'spiffe://example.org/agent/ci',
      clients: ['mcp-agent', 'mcp-agent-2'],
      tools: ['whoami', 'list_jobs'],
    },
    { id: 'spiffe://example.org/agent/*', tools: ['whoami'] },
  ],
  default: 'deny',
};

const PROXY = '127.0.0.2';

let pki: TestPki;
let stack: Stack;
let ci: Issued;
let build: Issued;
beforeAll(async () => {
  pki = await createTestPki();
  ci = await pki.client('ci', { uris: ['spiffe://example.org/agent/ci'] });
  build = await pki.client('build', { uris: ['spiffe://example.org/agent/build'] });
  const policyFile = path.join(pki.dir, 'policy.json');
  await writeFile(policyFile, JSON.stringify(POLICY));
  stack = await startStack({
    workers: 0,
    env: {
      GATEWAY_TLS_CERT: pki.server.certFile,
      GATEWAY_TLS_KEY: pki.server.keyFile,
      GATEWAY_TLS_CLIENT_CA: pki.ca.certFile,
      POLICY_FILE: policyFile,
      // A proxy on another loopback address; every other test connects from 127.0.0.1.
      TRUSTED_PROXIES: PROXY,
    },
  });
});
afterAll(async () => {
  await stack?.close();
  await pki?.close();
});

const names = (tools: Array<{ name: string }>) => tools.map((t) => t.name).sort();
const over = (client?: Issued) => ({ ca: pki.ca.cert, ...(client ? { client } : {}) });
const list = async (token: string, client?: Issued) =>
  mcpRequest(stack.mcpUrl, token, 'tools/list', {}, over(client));

test('the gateway serves its MCP endpoint over HTTPS at an https canonical URL', async () => {
  expect(stack.mcpUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/mcp$/);
  const meta = await new Promise<any>((resolve, reject) => {
    https
      .get(
        `${stack.gatewayUrl}/.well-known/oauth-protected-resource/mcp`,
        { ca: pki.ca.cert },
        (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve(JSON.parse(text)));
        },
      )
      .on('error', reject);
  });
  expect(meta.resource).toBe(stack.mcpUrl);
  const answer = await list(await stack.token('alice', 'acme'));
  expect(answer.status).toBe(200);
});

test('without a client certificate the OAuth client is the workload', async () => {
  const answer = await list(await stack.token('alice', 'acme'));
  expect(names(answer.body.result.tools)).toEqual(
    expect.arrayContaining(['generate_report', 'provision_test_environment', 'whoami']),
  );
  const agent2 = await list(await stack.token('alice', 'acme', { client: 'mcp-agent-2' }));
  expect(agent2.body.result.tools).toEqual([]);
});

test('the SPIFFE ID of a verified client certificate selects its policy entry, the exact one before a pattern', async () => {
  const agent2 = await stack.token('alice', 'acme', { client: 'mcp-agent-2' });
  expect(names((await list(agent2, ci)).body.result.tools)).toEqual(['list_jobs', 'whoami']);
  const agent = await stack.token('alice', 'acme');
  expect(names((await list(agent, ci)).body.result.tools)).toEqual(['list_jobs', 'whoami']);
  expect(names((await list(agent, build)).body.result.tools)).toEqual(['whoami']);
  const whoami = await mcpRequest(
    stack.mcpUrl,
    agent2,
    'tools/call',
    { name: 'whoami', arguments: {} },
    over(ci),
  );
  expect(whoami.body.result.structuredContent).toMatchObject({
    subject: 'alice',
    client: 'mcp-agent-2',
  });
});

test('an unlisted SPIFFE ID is denied under default deny, audited with the certificate’s workload', async () => {
  const elsewhere = await pki.client('elsewhere', { uris: ['spiffe://example.org/elsewhere/x'] });
  const token = await stack.token('gina', 'acme');
  expect((await list(token, elsewhere)).body.result.tools).toEqual([]);
  const denied = await mcpRequest(
    stack.mcpUrl,
    token,
    'tools/call',
    { name: 'whoami', arguments: {} },
    over(elsewhere),
  );
  expect(denied.body.error).toMatchObject({ code: -32602, message: 'Unknown tool: whoami' });
  const rows = await sql(
    stack.db.url,
    `SELECT type, reason, tool, body::jsonb -> 'data' AS data FROM audit.events WHERE subject = 'gina' ORDER BY seq`,
  );
  expect(rows).toEqual([
    {
      type: 'auth.denied',
      reason: 'policy_denied',
      tool: 'whoami',
      data: expect.objectContaining({
        workload: {
          kind: 'spiffe',
          id: 'spiffe://example.org/elsewhere/x',
          client: 'mcp-agent',
          via: 'tls',
        },
        rule: 'unlisted_workload',
      }),
    },
  ]);
});

test('a client certificate from a CA the gateway does not trust is refused with 403 and audited', async () => {
  const rogue = await pki.client('rogue', {
    uris: ['spiffe://example.org/agent/ci'],
    issuer: await pki.rogueCa(),
  });
  const answer = await list(await stack.token('hank', 'acme'), rogue);
  expect(answer.status).toBe(403);
  expect(answer.body).toMatchObject({ error: 'invalid_client_certificate' });
  const rows = await sql(
    stack.db.url,
    `SELECT type, reason FROM audit.events WHERE subject = 'hank'`,
  );
  expect(rows).toEqual([{ type: 'auth.denied', reason: 'client_cert_untrusted' }]);
});

test('a client certificate without a SPIFFE ID leaves the OAuth client as the workload', async () => {
  const plain = await pki.client('plain');
  const answer = await list(await stack.token('alice', 'acme'), plain);
  expect(names(answer.body.result.tools)).toContain('generate_report');
});

test('a certificate that claims a SPIFFE ID but is no valid X509-SVID is refused', async () => {
  const twoIds = await pki.client('two-ids', {
    uris: ['spiffe://example.org/agent/ci', 'spiffe://example.org/agent/x'],
  });
  const answer = await list(await stack.token('alice', 'acme'), twoIds);
  expect(answer.status).toBe(403);
  expect(answer.body.error_description).toMatch(/exactly one URI SAN/);
});

test('a certificate-bound token (RFC 8705) is accepted only with its own certificate', async () => {
  const thumbprint = createHash('sha256')
    .update(new X509Certificate(ci.cert).raw)
    .digest('base64url');
  const token = await signToken(
    {
      ...userClaims({ issuer: stack.issuer, audience: stack.mcpUrl, client: 'mcp-agent' }),
      cnf: { 'x5t#S256': thumbprint },
    },
    await devIdpSigningKey(stack.issuer),
  );
  expect((await list(token, ci)).status).toBe(200);
  for (const other of [build, undefined]) {
    const refused = await list(token, other);
    expect(refused.status).toBe(401);
    expect(refused.body).toMatchObject({ error: 'invalid_token' });
  }
});

test('from a trusted proxy, a repeated forwarded-certificate header or a value with two certificates is refused, not the first believed', async () => {
  const token = await stack.token('ivan', 'acme');
  const viaProxy = (value: string | string[]) =>
    mcpRequest(
      stack.mcpUrl,
      token,
      'tools/list',
      {},
      { ...over(), localAddress: PROXY, headers: { 'x-forwarded-client-cert': value } },
    );
  // One certificate: the proxy's word is taken.
  const one = await viaProxy(forwardedCert(ci));
  expect(names(one.body.result.tools)).toEqual(['list_jobs', 'whoami']);

  for (const several of [
    [forwardedCert(ci), forwardedCert(build)],
    `${forwardedCert(ci)},${forwardedCert(build)}`,
    encodeURIComponent(ci.cert + build.cert),
  ]) {
    const refused = await viaProxy(several);
    expect(refused).toEqual({
      status: 403,
      body: {
        error: 'invalid_client_certificate',
        error_description: 'the proxy forwarded more than one client certificate',
      },
    });
  }
  const rows = await sql(
    stack.db.url,
    `SELECT type, reason FROM audit.events WHERE subject = 'ivan' AND type = 'auth.denied'`,
  );
  expect(rows).toEqual(Array(3).fill({ type: 'auth.denied', reason: 'client_cert_ambiguous' }));
});

describe('TLS settings are checked at start', () => {
  const base = () => ({
    GATEWAY_TLS_CERT: pki.server.certFile,
    GATEWAY_TLS_KEY: pki.server.keyFile,
    GATEWAY_TLS_CLIENT_CA: pki.ca.certFile,
    resource: 'https://127.0.0.1:1/mcp',
  });
  const problemOf = (config: Parameters<typeof loadTls>[0]) =>
    loadTls(config).then(
      () => undefined,
      (e: unknown) => (e instanceof ConfigError ? e.issues[0] : e),
    );

  test('an http resource URL with a TLS listener is refused, naming GATEWAY_RESOURCE', async () => {
    expect(await problemOf({ ...base(), resource: 'http://127.0.0.1:1/mcp' })).toMatchObject({
      variable: 'GATEWAY_RESOURCE',
    });
  });

  test('a certificate without its key, a key of another certificate, or a missing file is refused', async () => {
    expect(await problemOf({ ...base(), GATEWAY_TLS_KEY: undefined })).toMatchObject({
      variable: 'GATEWAY_TLS_KEY',
    });
    expect(await problemOf({ ...base(), GATEWAY_TLS_KEY: ci.keyFile })).toMatchObject({
      variable: 'GATEWAY_TLS_KEY',
    });
    expect(
      await problemOf({ ...base(), GATEWAY_TLS_CLIENT_CA: path.join(pki.dir, 'nope.pem') }),
    ).toMatchObject({
      variable: 'GATEWAY_TLS_CLIENT_CA',
      message: expect.stringContaining('ENOENT'),
    });
  });

  test('a client CA file must hold CA certificates', async () => {
    expect(await problemOf({ ...base(), GATEWAY_TLS_CLIENT_CA: ci.certFile })).toMatchObject({
      variable: 'GATEWAY_TLS_CLIENT_CA',
    });
  });
});
