// Refusals of senders nobody verified — a Security Event Token refused at /ssf/events, a
// Host or Origin the gateway does not serve — reach the audit trail as token failures do:
// the first per reason and window at once, the rest counted; and every one in the metrics.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { JWTPayload } from 'jose';
import {
  devIdpSigningKey,
  generateForeignKey,
  signToken,
  type SigningKey,
} from '../support/forge-token.ts';
import { sample } from '../support/metrics-sample.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';

const PUSH_AUTH = `Bearer ${randomUUID()}`;
const RISC = 'https://schemas.openid.net/secevent/risc/event-type';

let stack: Stack;
let idpKey: SigningKey;
beforeAll(async () => {
  stack = await startStack({ workers: 0, env: { SSF_PUSH_AUTH: PUSH_AUTH } });
  idpKey = await devIdpSigningKey(stack.issuer);
});
afterAll(async () => {
  await stack?.close();
});

const claims = (overrides: Record<string, unknown> = {}): JWTPayload => ({
  iss: stack.issuer,
  aud: stack.mcpUrl,
  jti: randomUUID(),
  iat: Math.floor(Date.now() / 1000),
  sub_id: { format: 'iss_sub', iss: stack.issuer, sub: 'refused-sam', tenant: 'acme' },
  tenant: 'acme',
  events: { [`${RISC}/account-disabled`]: {} },
  ...overrides,
});

async function push(body: string, authorization = PUSH_AUTH): Promise<number> {
  const r = await fetch(`${stack.gatewayUrl}/ssf/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/secevent+jwt', authorization },
    body,
  });
  await r.text();
  return r.status;
}

function withHeaders(headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      stack.mcpUrl,
      { method: 'POST', headers: { 'content-type': 'application/json', ...headers } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      },
    );
    request.on('error', reject);
    request.end('{"jsonrpc":"2.0","id":1,"method":"tools/list"}');
  });
}

async function deniedEvents(reasons: string[], expected: number) {
  const read = () =>
    sql(
      stack.db.url,
      `SELECT reason, tenant, subject, body FROM audit.events
        WHERE type = 'auth.denied' AND reason = ANY($1) ORDER BY seq`,
      [reasons],
    );
  // Denials of unverified senders are appended without holding up the answer.
  const rows = await pollUntil(read, (r) => r.length >= expected, 10_000, 50);
  return rows.map((r) => ({ reason: r.reason, subject: r.subject, data: JSON.parse(r.body).data }));
}

async function denialCount(layer: string, reason: string) {
  const text = await (await fetch(`${stack.gatewayUrl}/metrics`)).text();
  return sample(text, 'mtg_denials_total', { layer, reason, service: 'gateway' });
}

test('refused Security Event Tokens are audited once per reason and window, and each is counted', async () => {
  const foreign = await generateForeignKey();
  const good = () => signToken(claims(), idpKey, { typ: 'secevent+jwt' });
  const statuses = [
    await push(await good(), 'Bearer guessed'), // wrong push authorization
    await push(await good(), 'Bearer guessed'),
    await push(await good(), 'Bearer guessed'),
    // Forged: another key under the transmitter's kid; and a foreign key under its own.
    await push(await signToken(claims(), { ...foreign, kid: idpKey.kid }, { typ: 'secevent+jwt' })),
    await push(await signToken(claims(), foreign, { typ: 'secevent+jwt' })),
    await push(
      await signToken(claims({ aud: 'https://other.example/mcp' }), idpKey, {
        typ: 'secevent+jwt',
      }),
    ),
    await push(
      await signToken(claims({ aud: 'https://other.example/mcp' }), idpKey, {
        typ: 'secevent+jwt',
      }),
    ),
    await push(
      await signToken(claims({ iss: 'https://other-idp.example' }), idpKey, {
        typ: 'secevent+jwt',
      }),
    ),
  ];
  expect(statuses).toEqual(Array(8).fill(400));

  const reasons = [
    'set_authentication_failed',
    'set_invalid_key',
    'set_invalid_audience',
    'set_invalid_issuer',
  ];
  const events = await deniedEvents(reasons, 4);
  expect(events.map((e) => e.reason)).toEqual(reasons);
  for (const e of events) {
    expect(e.subject).toBeNull();
    expect(e.data).toMatchObject({
      path: '/ssf/events',
      description: expect.any(String),
      count: 1,
      firstInWindow: true,
    });
  }
  expect(events[1]!.data.description).toBe('the SET is not signed by a key of the transmitter');

  expect(await denialCount('ssf', 'set_authentication_failed')).toBe(3);
  expect(await denialCount('ssf', 'set_invalid_key')).toBe(2);
  expect(await denialCount('ssf', 'set_invalid_audience')).toBe(2);
  expect(await denialCount('ssf', 'set_invalid_issuer')).toBe(1);
});

test('a Host or Origin the gateway does not serve is audited once per window and each is counted', async () => {
  const statuses = [
    await withHeaders({ host: 'evil.example' }),
    await withHeaders({ host: 'evil.example' }),
    await withHeaders({ host: 'rebound.example:8080' }),
    await withHeaders({ origin: 'http://evil.example' }),
    await withHeaders({ origin: 'http://evil.example' }),
  ];
  expect(statuses).toEqual(Array(5).fill(403));

  const events = await deniedEvents(['host_not_allowed', 'origin_not_allowed'], 2);
  expect(events).toEqual([
    {
      reason: 'host_not_allowed',
      subject: null,
      data: { path: '/mcp', host: 'evil.example', count: 1, firstInWindow: true },
    },
    {
      reason: 'origin_not_allowed',
      subject: null,
      data: { path: '/mcp', origin: 'http://evil.example', count: 1, firstInWindow: true },
    },
  ]);
  expect(await denialCount('http', 'host_not_allowed')).toBe(3);
  expect(await denialCount('http', 'origin_not_allowed')).toBe(2);
});
