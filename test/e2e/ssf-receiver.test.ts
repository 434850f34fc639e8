import { randomUUID } from 'node:crypto';
import type { JWTPayload } from 'jose';
import {
  devIdpSigningKey,
  generateForeignKey,
  signToken,
  unsecuredToken,
  type SigningKey,
} from '../support/forge-token.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';

// The Shared Signals push receiver (RFC 8935) at POST /ssf/events: the dev IdP's real pushes,
// and SETs crafted here with the IdP's own key so that each one reaches the check it breaks.

const PUSH_AUTH = `Bearer ${randomUUID()}`;
const RISC = 'https://schemas.openid.net/secevent/risc/event-type';
const CAEP = 'https://schemas.openid.net/secevent/caep/event-type';

let stack: Stack;
let idpKey: SigningKey;
beforeAll(async () => {
  stack = await startStack({ workers: 1, env: { SSF_PUSH_AUTH: PUSH_AUTH } });
  idpKey = await devIdpSigningKey(stack.issuer);
});
afterAll(async () => {
  await stack?.close();
});

/** Claims of one SET as the dev IdP builds them, about `sub` in `tenant`. */
function setClaims(
  sub: string,
  event: string,
  overrides: Record<string, unknown> = {},
): JWTPayload {
  return {
    iss: stack.issuer,
    aud: stack.mcpUrl,
    jti: randomUUID(),
    iat: Math.floor(Date.now() / 1000),
    sub_id: { format: 'iss_sub', iss: stack.issuer, sub, tenant: 'acme' },
    tenant: 'acme',
    events: { [event]: {} },
    ...overrides,
  };
}

const signSet = (claims: JWTPayload, key: SigningKey = idpKey, typ = 'secevent+jwt') =>
  signToken(claims, key, { typ });

async function push(
  body: string,
  options: { contentType?: string; authorization?: string | null } = {},
): Promise<{ status: number; text: string; json?: { err: string; description: string } }> {
  const authorization = options.authorization === undefined ? PUSH_AUTH : options.authorization;
  const response = await fetch(`${stack.gatewayUrl}/ssf/events`, {
    method: 'POST',
    headers: {
      'content-type': options.contentType ?? 'application/secevent+jwt',
      accept: 'application/json',
      ...(authorization !== null ? { authorization } : {}),
    },
    body,
  });
  const text = await response.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, text, json };
}

const principalRow = async (subject: string, tenant = 'acme') =>
  (
    await sql(stack.db.url, 'SELECT * FROM app.principals WHERE tenant = $1 AND subject = $2', [
      tenant,
      subject,
    ])
  )[0];

const principalEvents = (subject: string) =>
  sql(
    stack.db.url,
    `SELECT type, reason, tenant FROM audit.events WHERE subject = $1 AND type LIKE 'principal.%' ORDER BY seq`,
    [subject],
  );

test('a user disabled at the dev IdP: both pushed SETs are accepted (202) and the principal is revoked', async () => {
  const answer = await stack.idpUser('disable', 'dana', 'acme');
  expect(answer.push.pushed).toBe(true);
  if (!answer.push.pushed) return;
  expect(answer.push.deliveries.map((d) => [d.event, d.status, d.delivered])).toEqual([
    [`${RISC}/account-disabled`, 202, true],
    [`${CAEP}/session-revoked`, 202, true],
  ]);
  // The first signal revokes; the second finds the principal revoked and changes nothing.
  expect(await principalRow('dana')).toMatchObject({
    revoked: true,
    revoked_by: { path: 'ssf:account-disabled' },
  });
  expect(await principalEvents('dana')).toEqual([
    { type: 'principal.revoked', reason: 'ssf:account-disabled', tenant: 'acme' },
  ]);
  // Only acme/dana: the same name elsewhere is someone else.
  expect(await principalRow('dana', 'globex')).toBeUndefined();

  const enabled = await stack.idpUser('enable', 'dana', 'acme');
  expect(enabled.push.pushed && enabled.push.deliveries.map((d) => d.status)).toEqual([202]);
  expect(await principalRow('dana')).toMatchObject({
    revoked: false,
    restored_by: { path: 'ssf:account-enabled' },
  });
});

test('a crafted credential-change SET is answered 202 with an empty body and revokes the subject', async () => {
  const r = await push(await signSet(setClaims('cora', `${CAEP}/credential-change`)));
  expect(r).toMatchObject({ status: 202, text: '' });
  const row = await pollUntil(
    () => principalRow('cora'),
    (p) => p?.revoked === true,
    5000,
  );
  expect(row).toMatchObject({ revoked: true, revoked_by: { path: 'ssf:credential-change' } });
  expect(row.revoked_by.jti).toEqual(expect.any(String));
});

test('the tenant may come from sub_id alone; email and opaque subjects are accepted', async () => {
  const onlyNested = setClaims('nell', `${RISC}/account-disabled`);
  delete onlyNested.tenant;
  expect((await push(await signSet(onlyNested))).status).toBe(202);
  expect(await principalRow('nell')).toMatchObject({ revoked: true });

  const email = setClaims('x', `${RISC}/account-disabled`, {
    sub_id: { format: 'email', email: 'eve@acme.example' },
  });
  expect((await push(await signSet(email))).status).toBe(202);
  expect(await principalRow('eve@acme.example')).toMatchObject({ revoked: true });
});

type Case = [
  string,
  string,
  () => Promise<{ body: string; contentType?: string; authorization?: string | null }>,
];

const rejected: Case[] = [
  [
    'signed with a foreign key (its own kid)',
    'invalid_key',
    async () => ({
      body: await signSet(setClaims('v1', `${RISC}/account-disabled`), await generateForeignKey()),
    }),
  ],
  [
    'signed with a foreign key under the IdP kid',
    'invalid_key',
    async () => ({
      body: await signSet(setClaims('v2', `${RISC}/account-disabled`), {
        ...(await generateForeignKey()),
        kid: idpKey.kid,
      }),
    }),
  ],
  [
    'unsecured (alg none)',
    'invalid_key',
    async () => ({
      body: unsecuredToken(setClaims('v3', `${RISC}/account-disabled`), { typ: 'secevent+jwt' }),
    }),
  ],
  [
    'from another issuer (signed with the IdP key)',
    'invalid_issuer',
    async () => ({
      body: await signSet(
        setClaims('v4', `${RISC}/account-disabled`, { iss: 'https://evil.example' }),
      ),
    }),
  ],
  [
    'for another audience',
    'invalid_audience',
    async () => ({
      body: await signSet(
        setClaims('v5', `${RISC}/account-disabled`, { aud: 'https://other.example/receiver' }),
      ),
    }),
  ],
  [
    'without jti',
    'invalid_request',
    async () => ({
      body: await signSet(setClaims('v6', `${RISC}/account-disabled`, { jti: undefined })),
    }),
  ],
  [
    'without iat',
    'invalid_request',
    async () => ({
      body: await signSet(setClaims('v7', `${RISC}/account-disabled`, { iat: undefined })),
    }),
  ],
  [
    'without events',
    'invalid_request',
    async () => ({
      body: await signSet(setClaims('v8', `${RISC}/account-disabled`, { events: undefined })),
    }),
  ],
  [
    'typed JWT instead of secevent+jwt',
    'invalid_request',
    async () => ({
      body: await signSet(setClaims('v9', `${RISC}/account-disabled`), idpKey, 'JWT'),
    }),
  ],
  [
    'issued 10 minutes ago (stale)',
    'invalid_request',
    async () => ({
      body: await signSet(
        setClaims('v10', `${RISC}/account-disabled`, { iat: Math.floor(Date.now() / 1000) - 600 }),
      ),
    }),
  ],
  [
    'issued 10 minutes in the future',
    'invalid_request',
    async () => ({
      body: await signSet(
        setClaims('v11', `${RISC}/account-disabled`, { iat: Math.floor(Date.now() / 1000) + 600 }),
      ),
    }),
  ],
  [
    'naming no tenant',
    'invalid_request',
    async () => ({
      body: await signSet(
        setClaims('v12', `${RISC}/account-disabled`, {
          tenant: undefined,
          sub_id: { format: 'iss_sub', iss: stack.issuer, sub: 'v12' },
        }),
      ),
    }),
  ],
  [
    'naming a user of another issuer',
    'invalid_request',
    async () => ({
      body: await signSet(
        setClaims('v13', `${RISC}/account-disabled`, {
          sub_id: {
            format: 'iss_sub',
            iss: 'https://other-idp.example',
            sub: 'v13',
            tenant: 'acme',
          },
        }),
      ),
    }),
  ],
  [
    'sent as application/json',
    'invalid_request',
    async () => ({
      body: await signSet(setClaims('v14', `${RISC}/account-disabled`)),
      contentType: 'application/json',
    }),
  ],
  [
    'sent as application/jwt',
    'invalid_request',
    async () => ({
      body: await signSet(setClaims('v15', `${RISC}/account-disabled`)),
      contentType: 'application/jwt',
    }),
  ],
  ['not a JWT at all', 'invalid_request', async () => ({ body: 'hello' })],
  [
    'without the agreed Authorization header',
    'authentication_failed',
    async () => ({
      body: await signSet(setClaims('v16', `${RISC}/account-disabled`)),
      authorization: null,
    }),
  ],
  [
    'with a wrong Authorization header',
    'authentication_failed',
    async () => ({
      body: await signSet(setClaims('v17', `${RISC}/account-disabled`)),
      authorization: 'Bearer guessed',
    }),
  ],
  [
    'whose jti contains U+0000',
    'invalid_request',
    async () => ({
      body: await signSet(setClaims('v18', `${RISC}/account-disabled`, { jti: 'a\u0000b' })),
    }),
  ],
  [
    'whose subject contains U+0000',
    'invalid_request',
    async () => ({
      body: await signSet(
        setClaims('v19', `${RISC}/account-disabled`, {
          sub_id: { format: 'iss_sub', iss: stack.issuer, sub: 'v19\u0000', tenant: 'acme' },
        }),
      ),
    }),
  ],
];

test.each(rejected)(
  'a SET %s is refused with 400 %s and changes nothing',
  async (_name, err, make) => {
    const { body, ...options } = await make();
    const received = await sql(stack.db.url, 'SELECT count(*)::int AS n FROM app.received_sets');
    const r = await push(body, options);
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ err, description: expect.any(String) });
    // Nothing recorded: not the jti, not a principal, not an audit event.
    expect(await sql(stack.db.url, 'SELECT count(*)::int AS n FROM app.received_sets')).toEqual(
      received,
    );
    const subjects = Array.from({ length: 19 }, (_, i) => `v${i + 1}`);
    expect(
      await sql(stack.db.url, 'SELECT * FROM app.principals WHERE subject = ANY($1)', [subjects]),
    ).toEqual([]);
    expect(
      await sql(
        stack.db.url,
        `SELECT * FROM audit.events WHERE type LIKE 'principal.%' AND subject = ANY($1)`,
        [subjects],
      ),
    ).toEqual([]);
  },
);

test("a user's access token pushed as a SET is refused (typ at+jwt is not a security event)", async () => {
  const token = await stack.token('tom', 'acme');
  const r = await push(token);
  expect(r.status).toBe(400);
  expect(r.json?.err).toBe('invalid_request');
  expect(await principalRow('tom')).toBeUndefined();
});

test('a replayed jti is acknowledged (202) and changes nothing', async () => {
  const disabled = await signSet(setClaims('rex', `${RISC}/account-disabled`));
  expect((await push(disabled)).status).toBe(202);
  expect(await principalRow('rex')).toMatchObject({ revoked: true });
  expect((await push(await signSet(setClaims('rex', `${RISC}/account-enabled`)))).status).toBe(202);
  expect(await principalRow('rex')).toMatchObject({ revoked: false });

  const replay = await push(disabled);
  expect(replay).toMatchObject({ status: 202, text: '' });
  expect(await principalRow('rex')).toMatchObject({ revoked: false });
  expect((await principalEvents('rex')).map((e) => e.type)).toEqual([
    'principal.revoked',
    'principal.restored',
  ]);
});

test('an event type the receiver does not act on is acknowledged and ignored', async () => {
  const r = await push(await signSet(setClaims('ivy', `${CAEP}/token-claims-change`)));
  expect(r.status).toBe(202);
  expect(await principalRow('ivy')).toBeUndefined();
  // SSF's stream verification event carries no subject at all.
  const verification = setClaims(
    'ivy',
    'https://schemas.openid.net/secevent/ssf/event-type/verification',
    { sub_id: undefined, tenant: undefined },
  );
  expect((await push(await signSet(verification))).status).toBe(202);
});

test('only POST is served', async () => {
  const r = await fetch(`${stack.gatewayUrl}/ssf/events`);
  expect(r.status).toBe(405);
  expect(r.headers.get('allow')).toBe('POST');
});
