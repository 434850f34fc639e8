import { afterEach, describe, expect, jest, test } from '@jest/globals';
import {
  createKeySource,
  resolveClaimMapping,
  verifyAccessToken,
  type KeySource,
} from '../src/index.ts';
import { countingFetch, startJwksServer, type JwksServer } from './support/jwks-server.ts';
import { AUDIENCE, baseClaims, ISSUER, jwksOf, NOW_MS, sign, testKey } from './support/keys.ts';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
  jest.useRealTimers();
});

/** A clock the test moves by hand. */
const clock = () => {
  const c = { ms: NOW_MS, now: () => c.ms };
  return c;
};

async function issuer(...kids: string[]) {
  const keys = await Promise.all(kids.map((kid) => testKey(kid)));
  const server = await startJwksServer(jwksOf(...keys));
  cleanups.push(() => server.close());
  return { keys, server };
}

function remoteSource(server: JwksServer, c = clock(), extra: { minRefreshGapMs?: number } = {}) {
  const counter = countingFetch();
  const errors: Error[] = [];
  const source = createKeySource({
    jwksUri: server.url,
    fetch: counter.fetch,
    now: c.now,
    onError: (e) => errors.push(e),
    ...extra,
  });
  cleanups.push(() => source.stop());
  return { source, counter, errors, clock: c };
}

const verify = (token: string, keys: KeySource) =>
  verifyAccessToken(token, {
    keys,
    issuer: ISSUER,
    audience: AUDIENCE,
    claims: resolveClaimMapping('default'),
    now: () => NOW_MS,
  });

describe('createKeySource with a JWKS URL', () => {
  test('is not ready until start() has loaded the key set', async () => {
    const { keys, server } = await issuer('k1');
    const { source, counter } = remoteSource(server);
    expect(source.ready()).toBe(false);
    await source.start();
    expect(source.ready()).toBe(true);
    expect(counter.attempts).toBe(1);
    expect((await verify(await sign(keys[0]!, baseClaims()), source)).ok).toBe(true);
  });

  test('loads on first use when start() was never called', async () => {
    const { keys, server } = await issuer('k1');
    const { source, counter } = remoteSource(server);
    expect((await verify(await sign(keys[0]!, baseClaims()), source)).ok).toBe(true);
    expect(counter.attempts).toBe(1);
  });

  test('picks up a rotated-in key with one refetch, then serves it from memory', async () => {
    const { keys, server } = await issuer('k1');
    const { source, counter, clock: c } = remoteSource(server);
    await source.start();
    c.ms += 60_000; // the last fetch is older than the refetch gap

    const next = await testKey('k2');
    server.setKeys(jwksOf(keys[0]!, next));
    const token = await sign(next, baseClaims());
    const results = await Promise.all([verify(token, source), verify(token, source)]);
    expect(results.map((r) => r.ok)).toEqual([true, true]);
    expect(counter.attempts).toBe(2); // start + one refetch shared by both requests

    expect((await verify(token, source)).ok).toBe(true);
    expect((await verify(await sign(keys[0]!, baseClaims()), source)).ok).toBe(true);
    expect(counter.attempts).toBe(2);
  });

  test('refetches for unknown kids at most once per minRefreshGapMs', async () => {
    const { server } = await issuer('k1');
    const {
      source,
      counter,
      clock: c,
    } = remoteSource(server, clock(), { minRefreshGapMs: 30_000 });
    await source.start();
    c.ms += 30_000;

    const strangers = await Promise.all([1, 2, 3, 4, 5].map((i) => testKey(`x${i}`)));
    for (const stranger of strangers) {
      const result = await verify(await sign(stranger, baseClaims()), source);
      expect(result.ok || result.code).toBe('unknown_key');
    }
    expect(counter.attempts).toBe(2);

    c.ms += 29_999;
    await verify(await sign(strangers[0]!, baseClaims()), source);
    expect(counter.attempts).toBe(2);
    c.ms += 1;
    await verify(await sign(strangers[0]!, baseClaims()), source);
    expect(counter.attempts).toBe(3);
  });

  test('rides out an issuer outage: known keys verify, unknown kids fail without a fetch storm', async () => {
    const { keys, server } = await issuer('k1');
    const { source, counter, errors, clock: c } = remoteSource(server);
    await source.start();
    await server.close();
    c.ms += 10 * 60_000;

    // a background refresh during the outage fails and keeps the last good key set
    await expect(source.refresh()).rejects.toMatchObject({ code: 'keys_unavailable' });
    expect(source.ready()).toBe(true);
    const known = await sign(keys[0]!, baseClaims());
    expect((await verify(known, source)).ok).toBe(true);
    expect(counter.attempts).toBe(2);

    c.ms += 60_000;
    const stranger = await sign(await testKey('k9'), baseClaims());
    const results = [];
    for (let i = 0; i < 20; i++) results.push(await verify(stranger, source));
    for (const r of results) expect(r.ok || r.code).toBe('keys_unavailable');
    expect(counter.attempts).toBe(3); // one refetch attempt for twenty requests
    expect(errors).toHaveLength(1);
    expect(errors[0]!.message).toContain(server.url);

    for (let i = 0; i < 20; i++) expect((await verify(known, source)).ok).toBe(true);
    expect(counter.attempts).toBe(3);
  });

  test('gives up on a hanging issuer after timeoutMs', async () => {
    const server = await startJwksServer({ keys: [] }, { hang: true });
    cleanups.push(() => server.close());
    const source = createKeySource({ jwksUri: server.url, timeoutMs: 50, onError: () => {} });
    await expect(source.refresh()).rejects.toMatchObject({ code: 'keys_unavailable' });
    expect(source.ready()).toBe(false);
  });

  test.each([
    ['an HTTP error', () => new Response('nope', { status: 500 })],
    ['a body that is not JSON', () => new Response('<html>')],
    ['JSON that is not a key set', () => Response.json({ keys: 'none' })],
  ])('refuses %s and keeps the last good key set', async (_name, reply) => {
    const key = await testKey('k1');
    let respond = () => Response.json(jwksOf(key));
    const source = createKeySource({
      jwksUri: 'https://idp.example/jwks',
      fetch: async () => respond(),
      onError: () => {},
    });
    await source.refresh();
    respond = reply;
    await expect(source.refresh()).rejects.toMatchObject({ code: 'keys_unavailable' });
    expect((await verify(await sign(key, baseClaims()), source)).ok).toBe(true);
  });
});

describe('background refresh', () => {
  // The interval is what is under test here, so the timers are fake and so is fetch: a stub
  // that answers from memory (a loopback request would not finish inside a fake tick).
  function stubIssuer() {
    const stub = {
      calls: 0,
      down: false,
      body: { keys: [] } as object,
      fetch: (async () => {
        stub.calls++;
        if (stub.down) throw new TypeError('fetch failed');
        return Response.json(stub.body);
      }) as typeof fetch,
    };
    return stub;
  }

  test('refreshes every refreshIntervalMs once loaded, and stops on stop()', async () => {
    jest.useFakeTimers();
    const stub = stubIssuer();
    const source = createKeySource({
      jwksUri: 'https://idp.example/jwks',
      fetch: stub.fetch,
      refreshIntervalMs: 300_000,
    });
    await source.start();
    expect(stub.calls).toBe(1);
    await jest.advanceTimersByTimeAsync(299_999);
    expect(stub.calls).toBe(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(stub.calls).toBe(2);
    await jest.advanceTimersByTimeAsync(600_000);
    expect(stub.calls).toBe(4);
    source.stop();
    await jest.advanceTimersByTimeAsync(3_600_000);
    expect(stub.calls).toBe(4);
  });

  test('retries every minRefreshGapMs until the first key set loads', async () => {
    jest.useFakeTimers();
    const stub = stubIssuer();
    stub.down = true;
    const errors: Error[] = [];
    const source = createKeySource({
      jwksUri: 'https://idp.example/jwks',
      fetch: stub.fetch,
      minRefreshGapMs: 30_000,
      onError: (e) => errors.push(e),
    });
    cleanups.push(() => source.stop());
    await source.start(); // resolves even though the first load failed
    expect(source.ready()).toBe(false);
    await jest.advanceTimersByTimeAsync(60_000);
    expect(stub.calls).toBe(3);
    expect(errors).toHaveLength(3);

    stub.down = false;
    await jest.advanceTimersByTimeAsync(30_000);
    expect(source.ready()).toBe(true);
    await jest.advanceTimersByTimeAsync(60_000);
    expect(stub.calls).toBe(4); // back on the 5-minute period
  });

  test('does not keep the process alive', async () => {
    const stub = stubIssuer();
    const spy = jest.spyOn(globalThis, 'setTimeout');
    const source = createKeySource({ jwksUri: 'https://idp.example/jwks', fetch: stub.fetch });
    cleanups.push(() => source.stop());
    await source.start();
    const timer = spy.mock.results.at(-1)!.value as NodeJS.Timeout;
    expect(timer.hasRef()).toBe(false);
    spy.mockRestore();
  });
});

describe('createKeySource with a pinned key set', () => {
  test('is ready at once and verifies without any fetch', async () => {
    const key = await testKey('k1');
    const source = createKeySource({ jwks: jwksOf(key) });
    expect(source.ready()).toBe(true);
    await source.start();
    await source.refresh();
    expect((await verify(await sign(key, baseClaims()), source)).ok).toBe(true);
  });

  test('refuses a set with a private key', async () => {
    const { exportJWK, generateKeyPair } = await import('jose');
    const { privateKey } = await generateKeyPair('ES256', { extractable: true });
    const source = createKeySource({
      jwks: { keys: [{ ...(await exportJWK(privateKey)), kid: 'p', alg: 'ES256' }] },
    });
    const token = await sign({ ...(await testKey('p')), privateKey }, baseClaims());
    await expect(verify(token, source)).rejects.toThrow(/public keys/);
  });
});
