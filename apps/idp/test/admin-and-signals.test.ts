import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import {
  CAEP_SESSION_REVOKED,
  RISC_ACCOUNT_DISABLED,
  RISC_ACCOUNT_ENABLED,
} from '../src/ssf/security-events.ts';
import { admin, RESOURCES, startTestIdp, type TestIdp } from './support/test-idp.ts';

interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A Shared Signals push receiver (RFC 8935) on loopback, answering `status`. */
async function startReceiver(status = 202) {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      if (status === 202) res.writeHead(202).end();
      else
        res
          .writeHead(status, { 'content-type': 'application/json' })
          .end(JSON.stringify({ err: 'invalid_request', description: 'test receiver refuses' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/ssf/events`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('admin API', () => {
  let idp: TestIdp;
  beforeAll(async () => {
    idp = await startTestIdp();
  });
  afterAll(() => idp.close());

  test('refuses requests without the admin token with 401', async () => {
    const response = await admin(idp, 'disable', { sub: 'alice', tenant: 'acme' }, null);
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect((await idp.idp.users.get({ sub: 'alice', tenant: 'acme' }))?.disabled).not.toBe(true);
  });

  test('refuses a wrong admin token with 401', async () => {
    const response = await admin(idp, 'disable', { sub: 'alice', tenant: 'acme' }, 'wrong-token');
    expect(response.status).toBe(401);
  });

  test('refuses a body without sub and tenant with 400', async () => {
    const response = await admin(idp, 'disable', { sub: 'alice' });
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: 'invalid_request' });
  });

  test('disables and enables a user, recording it in users.json; no push without SSF_PUSH_URL', async () => {
    const disabled = await admin(idp, 'disable', { sub: 'alice', tenant: 'acme' });
    expect(disabled.status).toBe(200);
    expect(await disabled.json()).toMatchObject({
      user: { sub: 'alice', tenant: 'acme', disabled: true },
      push: { pushed: false, reason: 'no_push_url' },
    });
    expect(await idp.idp.users.get({ sub: 'alice', tenant: 'acme' })).toMatchObject({
      disabled: true,
    });

    const enabled = await admin(idp, 'enable', { sub: 'alice', tenant: 'acme' });
    expect(await enabled.json()).toMatchObject({ user: { disabled: false } });
  });
});

describe('Shared Signals push on disable/enable', () => {
  test('disabling pushes a signed RISC account-disabled SET and a CAEP session-revoked SET', async () => {
    const receiver = await startReceiver();
    const idp = await startTestIdp({
      ssfPush: { url: receiver.url, authorization: 'Bearer receiver-secret' },
    });
    try {
      const response = await admin(idp, 'disable', { sub: 'alice', tenant: 'acme' });
      expect(response.status).toBe(200);
      const body = (await response.json()) as {
        push: { deliveries: { event: string; status: number }[] };
      };
      expect(body.push).toMatchObject({ pushed: true, url: receiver.url });
      expect(body.push.deliveries).toEqual([
        expect.objectContaining({ event: RISC_ACCOUNT_DISABLED, status: 202, delivered: true }),
        expect.objectContaining({ event: CAEP_SESSION_REVOKED, status: 202, delivered: true }),
      ]);

      expect(receiver.received).toHaveLength(2);
      const jwks = createRemoteJWKSet(new URL(`${idp.issuer}/jwks`));
      const sets = [];
      for (const { headers, body: token } of receiver.received) {
        expect(headers['content-type']).toBe('application/secevent+jwt');
        expect(headers.accept).toBe('application/json');
        expect(headers.authorization).toBe('Bearer receiver-secret');
        expect(decodeProtectedHeader(token)).toMatchObject({
          alg: 'ES256',
          typ: 'secevent+jwt',
          kid: idp.idp.kid,
        });
        const { payload } = await jwtVerify(token, jwks, {
          issuer: idp.issuer,
          audience: RESOURCES.gateway,
          algorithms: ['ES256'],
          typ: 'secevent+jwt',
          requiredClaims: ['jti', 'iat'],
        });
        expect(payload).toMatchObject({
          sub_id: { format: 'iss_sub', iss: idp.issuer, sub: 'alice', tenant: 'acme' },
          tenant: 'acme',
        });
        expect(Math.abs((payload.iat as number) - Date.now() / 1000)).toBeLessThan(10);
        expect(payload.exp).toBeUndefined();
        sets.push(payload);
      }
      expect(sets[0]!.events).toEqual({ [RISC_ACCOUNT_DISABLED]: { reason: 'dev-idp' } });
      expect(sets[1]!.events).toEqual({
        [CAEP_SESSION_REVOKED]: { event_timestamp: expect.any(Number) },
      });
      expect(sets[0]!.jti).not.toBe(sets[1]!.jti);

      await admin(idp, 'enable', { sub: 'alice', tenant: 'acme' });
      expect(receiver.received).toHaveLength(3);
      const { payload } = await jwtVerify(receiver.received[2]!.body, jwks, {
        typ: 'secevent+jwt',
      });
      expect(payload.events).toEqual({ [RISC_ACCOUNT_ENABLED]: {} });
    } finally {
      await idp.close();
      await receiver.close();
    }
  });

  test('a refused or unreachable push is reported, and the user is disabled all the same', async () => {
    const receiver = await startReceiver(400);
    const refusing = await startTestIdp({ ssfPush: { url: receiver.url } });
    try {
      const response = await admin(refusing, 'disable', { sub: 'bob', tenant: 'acme' });
      expect(response.status).toBe(200);
      const body = (await response.json()) as { push: { deliveries: unknown[] } };
      expect(body.push.deliveries).toEqual([
        expect.objectContaining({
          delivered: false,
          status: 400,
          error: expect.stringContaining('invalid_request'),
        }),
        expect.objectContaining({ delivered: false, status: 400 }),
      ]);
      expect(await refusing.idp.users.get({ sub: 'bob', tenant: 'acme' })).toMatchObject({
        disabled: true,
      });
    } finally {
      await refusing.close();
    }

    await receiver.close();
    const unreachable = await startTestIdp({ ssfPush: { url: receiver.url } });
    try {
      const response = await admin(unreachable, 'disable', { sub: 'bob', tenant: 'acme' });
      expect(response.status).toBe(200);
      const body = (await response.json()) as {
        push: { deliveries: { delivered: boolean; error?: string }[] };
      };
      expect(body.push.deliveries).toHaveLength(2);
      expect(body.push.deliveries.every((d) => !d.delivered && d.error)).toBe(true);
    } finally {
      await unreachable.close();
    }
  });
});
