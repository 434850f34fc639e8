import { CompactSign } from 'jose';
import {
  createCheckpointVerifier,
  headsHash,
  headsText,
  generateSigningJwk,
  loadSigningKey,
  publicJwkOf,
  signCheckpoint,
  SigningKeyError,
} from '../src/index.ts';

const heads = [
  { chain: 3, seq: 7, hash: 'cd'.repeat(32) },
  { chain: 0, seq: 42, hash: 'ab'.repeat(32) },
];
const now = new Date('2026-11-29T20:00:00.000Z');

test('a checkpoint signed with a key verifies with its public key and says what it signed', async () => {
  const jwk = await generateSigningJwk();
  const key = await loadSigningKey(JSON.stringify(jwk));
  expect(key.keyId).toBe(jwk.kid);
  expect(key.publicJwk.d).toBeUndefined();
  const signed = await signCheckpoint(heads, 40, key, now);
  const [header, payload] = signed.jws
    .split('.')
    .slice(0, 2)
    .map((p) => JSON.parse(Buffer.from(p, 'base64url').toString()));
  expect(header).toEqual({ alg: 'EdDSA', kid: jwk.kid, typ: 'mtg-audit-checkpoint' });
  // The heads sorted by chain, one "chain seq hash" line each: what the signed hash is over.
  expect(headsText(heads)).toBe(`0 42 ${'ab'.repeat(32)}\n3 7 ${'cd'.repeat(32)}\n`);
  expect(payload).toEqual({
    chains: 2,
    headsHash: headsHash(heads),
    legacyUntil: 40,
    signedAt: '2026-11-29T20:00:00.000Z',
  });
  expect(signed.heads.map((h) => h.chain)).toEqual([0, 3]);

  const verify = createCheckpointVerifier({ keys: [publicJwkOf(jwk)] });
  expect(await verify(signed.jws, heads)).toEqual({ ok: true, checkpoint: signed });
});

test('a checkpoint of chain heads verifies only with the very list of heads it signed', async () => {
  const key = await loadSigningKey(await generateSigningJwk());
  const signed = await signCheckpoint(heads, 0, key, now);
  const verify = createCheckpointVerifier({ keys: [key.publicJwk] });
  expect(await verify(signed.jws)).toMatchObject({ ok: false, code: 'malformed' });
  // One head moved back (a cut tail hidden in the list), one head left out, one added.
  const moved = [{ ...heads[0]!, seq: 6 }, heads[1]!];
  expect(await verify(signed.jws, moved)).toMatchObject({ ok: false, code: 'heads_mismatch' });
  expect(await verify(signed.jws, [heads[1]!])).toMatchObject({ code: 'heads_mismatch' });
  const added = [...heads, { chain: 9, seq: 1, hash: 'ef'.repeat(32) }];
  expect(await verify(signed.jws, added)).toMatchObject({ code: 'heads_mismatch' });
});

test('a checkpoint signed before there were chains still verifies, as one head of chain 0', async () => {
  const jwk = await generateSigningJwk();
  const key = await loadSigningKey(jwk);
  const head = { seq: 42, hash: 'ab'.repeat(32), occurredAt: '2026-11-29T19:41:28.123400Z' };
  const jws = await new CompactSign(
    new TextEncoder().encode(JSON.stringify({ ...head, signedAt: now.toISOString() })),
  )
    .setProtectedHeader({ alg: 'EdDSA', kid: jwk.kid, typ: 'mtg-audit-checkpoint' })
    .sign(key.privateKey);
  expect(await createCheckpointVerifier({ keys: [key.publicJwk] })(jws)).toMatchObject({
    ok: true,
    checkpoint: { format: 1, heads: [{ chain: 0, seq: 42, hash: head.hash }] },
  });
});

test('the wrong key, an altered payload or another kind of JWS does not verify', async () => {
  const jwk = await generateSigningJwk();
  const key = await loadSigningKey(jwk);
  const signed = await signCheckpoint(heads, 0, key, now);
  const other = publicJwkOf(await generateSigningJwk());

  expect(await createCheckpointVerifier({ keys: [other] })(signed.jws, heads)).toMatchObject({
    ok: false,
    code: 'unknown_key',
  });
  expect(
    await createCheckpointVerifier({ keys: [{ ...other, kid: jwk.kid }] })(signed.jws, heads),
  ).toMatchObject({ ok: false, code: 'bad_signature' });

  const verify = createCheckpointVerifier({ keys: [publicJwkOf(jwk)] });
  const [h, , s] = signed.jws.split('.');
  const altered = Buffer.from(
    JSON.stringify({
      chains: 2,
      headsHash: 'ee'.repeat(32),
      legacyUntil: 0,
      signedAt: now.toISOString(),
    }),
  ).toString('base64url');
  expect(await verify(`${h}.${altered}.${s}`, heads)).toMatchObject({
    ok: false,
    code: 'bad_signature',
  });
  expect(await verify('not-a-jws')).toMatchObject({ ok: false, code: 'malformed' });

  const notACheckpoint = await new CompactSign(new TextEncoder().encode('{"sub":"x"}'))
    .setProtectedHeader({ alg: 'EdDSA', kid: jwk.kid })
    .sign(key.privateKey);
  expect(await verify(notACheckpoint)).toMatchObject({ ok: false, code: 'malformed' });
});

test('a signing key must be a private Ed25519 JWK', async () => {
  const jwk = await generateSigningJwk();
  await expect(loadSigningKey(JSON.stringify(publicJwkOf(jwk)))).rejects.toThrow(SigningKeyError);
  await expect(loadSigningKey('{"kty":"RSA"}')).rejects.toThrow(/not an Ed25519 JWK/);
  await expect(loadSigningKey('nope')).rejects.toThrow(/not JSON/);
});
