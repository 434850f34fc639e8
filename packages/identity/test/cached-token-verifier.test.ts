import { beforeAll, expect, test } from '@jest/globals';
import type { JWTVerifyGetKey } from 'jose';
import {
  cachedTokenVerifier,
  createKeySource,
  resolveClaimMapping,
  type VerifyAccessTokenOptions,
} from '../src/index.ts';
import {
  AUDIENCE,
  baseClaims,
  ISSUER,
  jwksOf,
  NOW_MS,
  NOW_S,
  sign,
  testKey,
  type TestKey,
} from './support/keys.ts';

let key: TestKey;
let other: TestKey;
beforeAll(async () => {
  key = await testKey('es-1', 'ES256');
  other = await testKey('es-2', 'ES256');
});

/** Options whose key lookups are counted: a lookup is a signature check. */
function counted(clock: { ms: number }) {
  const source = createKeySource({ jwks: jwksOf(key) });
  const lookups = { n: 0 };
  const getKey: JWTVerifyGetKey = (header, token) => {
    lookups.n++;
    return source.getKey(header, token);
  };
  const options: VerifyAccessTokenOptions = {
    keys: getKey,
    issuer: ISSUER,
    audience: AUDIENCE,
    claims: resolveClaimMapping('default'),
    clockToleranceSec: 30,
    now: () => clock.ms,
  };
  return { options, lookups };
}

test('a token that verified is answered from memory until maxAgeMs, then checked again', async () => {
  const clock = { ms: NOW_MS };
  const { options, lookups } = counted(clock);
  const verify = cachedTokenVerifier(options, { maxAgeMs: 60_000 });
  const token = await sign(key, baseClaims());
  const first = await verify(token);
  expect(first).toMatchObject({ ok: true, principal: { subject: 'alice', tenant: 'acme' } });
  expect(await verify(token)).toEqual(first);
  clock.ms += 59_000;
  expect(await verify(token)).toEqual(first);
  expect(lookups.n).toBe(1);
  clock.ms += 2_000;
  expect((await verify(token)).ok).toBe(true);
  expect(lookups.n).toBe(2);
});

test('never past the token’s exp (with the clock tolerance), however long maxAgeMs is', async () => {
  const clock = { ms: NOW_MS };
  const { options } = counted(clock);
  const verify = cachedTokenVerifier(options, { maxAgeMs: 300_000 });
  const token = await sign(key, { ...baseClaims(), exp: NOW_S + 10 });
  expect((await verify(token)).ok).toBe(true);
  clock.ms = (NOW_S + 10 + 29) * 1000;
  expect((await verify(token)).ok).toBe(true);
  clock.ms = (NOW_S + 10 + 31) * 1000;
  expect(await verify(token)).toMatchObject({ ok: false, code: 'expired' });
});

test('a refusal is never remembered, and only the very same token hits', async () => {
  const clock = { ms: NOW_MS };
  const { options, lookups } = counted(clock);
  const verify = cachedTokenVerifier(options, { maxAgeMs: 60_000 });
  const foreign = await sign(other, baseClaims());
  expect((await verify(foreign)).ok).toBe(false);
  expect((await verify(foreign)).ok).toBe(false);
  expect(lookups.n).toBe(2);
  const good = await sign(key, baseClaims());
  await verify(good);
  // The same claims with a signature of another key: a different token, checked and refused.
  const [h, p] = good.split('.');
  const forged = `${h}.${p}.${foreign.split('.')[2]}`;
  expect((await verify(forged)).ok).toBe(false);
  expect(lookups.n).toBe(4);
});

test('at most maxEntries tokens are remembered (the oldest is forgotten), and 0 remembers none', async () => {
  const clock = { ms: NOW_MS };
  const { options, lookups } = counted(clock);
  const verify = cachedTokenVerifier(options, { maxAgeMs: 60_000, maxEntries: 2 });
  const tokens = await Promise.all(
    ['a', 'b', 'c'].map((jti) => sign(key, { ...baseClaims(), jti })),
  );
  for (const t of tokens) await verify(t);
  expect(lookups.n).toBe(3);
  await verify(tokens[2]!);
  await verify(tokens[1]!);
  expect(lookups.n).toBe(3);
  await verify(tokens[0]!);
  expect(lookups.n).toBe(4);

  const none = counted(clock);
  const always = cachedTokenVerifier(none.options, { maxAgeMs: 0 });
  await always(tokens[0]!);
  await always(tokens[0]!);
  expect(none.lookups.n).toBe(2);
});
