import { createCredentialCipher } from '@mtg/identity';
import { connectV1 } from '../support/clients.ts';
import { devIdpSigningKey, signToken, userClaims } from '../support/forge-token.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';
import { jobToolsWire } from '../support/wires.ts';

// A compromised worker holds every running task's delegation. It must not be able to turn
// one into a token the gateway serves: the dev IdP lets mcp-worker exchange only for the
// downstream, and the gateway refuses its own service clients and delegated (`act`) tokens.

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ workers: 0 });
});
afterAll(async () => {
  await stack?.close();
});

const basic = (s: Stack, client: 'mcp-agent' | 'mcp-gateway' | 'mcp-worker') =>
  `Basic ${Buffer.from(`${client}:${s.secrets.clientSecrets[client]}`).toString('base64')}`;

async function tokenRequest(
  s: Stack,
  client: 'mcp-agent' | 'mcp-gateway' | 'mcp-worker',
  params: Record<string, string>,
) {
  const r = await fetch(`${s.issuer}/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: basic(s, client),
    },
    body: new URLSearchParams(params),
  });
  return { status: r.status, body: (await r.json()) as Record<string, any> };
}

/** The delegation the gateway stored for `taskId`, opened as a worker would. */
async function storedDelegation(taskId: string): Promise<string> {
  const [row] = await sql(
    stack.db.url,
    'SELECT key_id, iv, ciphertext, tag FROM app.task_credentials WHERE task_id = $1',
    [taskId],
  );
  const cipher = createCredentialCipher(
    { k1: Buffer.from(stack.secrets.credentialKey, 'base64') },
    'k1',
  );
  return cipher.open(
    { keyId: row.key_id, iv: row.iv, ciphertext: row.ciphertext, tag: row.tag },
    taskId,
  );
}

/** A bare MCP request: what the gateway's HTTP layer answers `token`. */
async function ping(s: Stack, token: string) {
  const r = await fetch(s.mcpUrl, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
  });
  return { status: r.status, body: (await r.json()) as any };
}

test('the worker cannot trade a stored delegation for a token of the gateway at the dev IdP', async () => {
  const user = await stack.token('wanda', 'acme');
  const taskId = await jobToolsWire(stack.mcpUrl).start(user, 'generate_report', {
    report: 'laundry',
  });
  const delegation = await storedDelegation(taskId);
  const actor = await tokenRequest(stack, 'mcp-worker', {
    grant_type: 'client_credentials',
    resource: 'urn:mcp-task-gateway:worker',
  });
  const exchange = (target: Record<string, string>) =>
    tokenRequest(stack, 'mcp-worker', {
      grant_type: TOKEN_EXCHANGE,
      subject_token: delegation,
      subject_token_type: ACCESS_TOKEN,
      actor_token: actor.body.access_token,
      actor_token_type: ACCESS_TOKEN,
      ...target,
    });

  for (const name of ['resource', 'audience']) {
    const target = { [name]: stack.mcpUrl };
    const refused = await exchange(target);
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ error: 'invalid_target' });
    expect(refused.body.error_description).toContain('mcp-worker may not exchange tokens for');
  }
  // Its one hop still works: the downstream.
  const downstream = await exchange({ resource: stack.downstreamUrl, ttl: '60' });
  expect(downstream.status).toBe(200);
  // The gateway does not exchange for the downstream itself either.
  const gateway = await tokenRequest(stack, 'mcp-gateway', {
    grant_type: TOKEN_EXCHANGE,
    subject_token: user,
    subject_token_type: ACCESS_TOKEN,
    resource: stack.downstreamUrl,
  });
  expect(gateway.body).toMatchObject({ error: 'invalid_target' });
});

test('a token held by a service client of the gateway, as a laundered delegation looks, gets 401 and starts nothing', async () => {
  // What the worker got before the IdP refused it: a user's token for the gateway, issued to
  // mcp-worker, with the act chain of the delegation.
  const laundered = await signToken(
    {
      ...userClaims({
        issuer: stack.issuer,
        audience: stack.mcpUrl,
        sub: 'walt',
        client: 'mcp-worker',
      }),
      act: { sub: 'mcp-worker', act: { sub: 'mcp-gateway' } },
    },
    await devIdpSigningKey(stack.issuer),
  );
  const answer = await ping(stack, laundered);
  expect(answer).toEqual({
    status: 401,
    body: {
      error: 'invalid_token',
      error_description: 'tokens of the gateway’s own service clients are not accepted here',
    },
  });
  await expect(connectV1(stack.mcpUrl, laundered)).rejects.toThrow();
  await expect(
    jobToolsWire(stack.mcpUrl).start(laundered, 'generate_report', { report: 'laundered' }),
  ).rejects.toThrow();

  expect(
    await sql(stack.db.url, `SELECT count(*)::int AS n FROM app.tasks WHERE subject = 'walt'`),
  ).toEqual([{ n: 0 }]);
  const denied = await sql(
    stack.db.url,
    `SELECT DISTINCT type, reason, client FROM audit.events WHERE subject = 'walt'`,
  );
  expect(denied).toEqual([
    { type: 'auth.denied', reason: 'token_service_client', client: 'mcp-worker' },
  ]);
});

test('a delegated token (with act), even of an agent client, gets 401 and an audited reason', async () => {
  const user = await stack.token('xena', 'acme');
  // The dev IdP lets an agent exchange its own user token; the result carries act.
  const exchanged = await tokenRequest(stack, 'mcp-agent', {
    grant_type: TOKEN_EXCHANGE,
    subject_token: user,
    subject_token_type: ACCESS_TOKEN,
    resource: stack.mcpUrl,
  });
  expect(exchanged.status).toBe(200);
  const answer = await ping(stack, exchanged.body.access_token);
  expect(answer).toEqual({
    status: 401,
    body: {
      error: 'invalid_token',
      error_description: 'delegated tokens (with an "act" claim) are not accepted here',
    },
  });
  // The user's own token is served as ever.
  expect((await ping(stack, user)).status).toBe(200);
  expect(
    await sql(
      stack.db.url,
      `SELECT type, reason, client FROM audit.events WHERE subject = 'xena' AND type = 'auth.denied'`,
    ),
  ).toEqual([{ type: 'auth.denied', reason: 'token_delegated', client: 'mcp-agent' }]);
});

test('with AUTH_DELEGATED_TOKENS=accept a delegated agent token is served; service clients stay refused, AUTH_SERVICE_CLIENTS names them', async () => {
  const open = await startStack({
    workers: 0,
    env: { AUTH_DELEGATED_TOKENS: 'accept', AUTH_SERVICE_CLIENTS: 'mcp-worker,mcp-agent-2' },
  });
  try {
    const user = await open.token('yann', 'acme');
    const exchanged = await tokenRequest(open, 'mcp-agent', {
      grant_type: TOKEN_EXCHANGE,
      subject_token: user,
      subject_token_type: ACCESS_TOKEN,
      resource: open.mcpUrl,
    });
    expect((await ping(open, exchanged.body.access_token)).status).toBe(200);
    const agent2 = await open.token('yann', 'acme', { client: 'mcp-agent-2' });
    expect((await ping(open, agent2)).status).toBe(401);
    // The gateway's own CLIENT_ID is always refused, listed or not.
    const key = await devIdpSigningKey(open.issuer);
    const asGateway = await signToken(
      userClaims({ issuer: open.issuer, audience: open.mcpUrl, client: 'mcp-gateway' }),
      key,
    );
    expect((await ping(open, asGateway)).status).toBe(401);
  } finally {
    await open.close();
  }
});
