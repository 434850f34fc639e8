import { CompactSign } from 'jose';
import {
  createCheckpointVerifier,
  generateSigningJwk,
  loadSigningKey,
  publicJwkOf,
  signCheckpoint,
  SigningKeyError,
} from '../src/index.ts';

const head = { seq: 42, hash: 'ab'.repeat(32), occurredAt: '2026-11-29T19:41:28.123400Z' };
const now = new Date('2026-11-29T20:00:00.000Z');

test('a checkpoint signed with a key verifies with its public key and says what it signed', async () => {
  const jwk = await generateSigningJwk();
  const key = await loadSigningKey(JSON.stringify(jwk));
  expect(key.keyId).toBe(jwk.kid);
  expect(key.publicJwk.d).toBeUndefined();
  const signed = await signCheckpoint(head, key, now);
  const [header, payload] = signed.jws
    .split('.')
    .slice(0, 2)
    .map((p) => JSON.parse(Buffer.from(p!, 'base64url').toString()));
  expect(header).toEqual({ alg: 'EdDSA', kid: jwk.kid, typ: 'mtg-audit-checkpoint' });
  expect(payload).toEqual({ ...head, signedAt: '2026-11-29T20:00:00.000Z' });

  const verify = createCheckpointVerifier({ keys: [publicJwkOf(jwk)] });
  expect(await verify(signed.jws)).toEqual({ ok: true, checkpoint: signed });
});

test('the wrong key, an altered payload or another kind of JWS does not verify', async () => {
  const jwk = await generateSigningJwk();
  const key = await loadSigningKey(jwk);
  const signed = await signCheckpoint(head, key, now);
  const other = publicJwkOf(await generateSigningJwk());

  expect(await createCheckpointVerifier({ keys: [other] })(signed.jws)).toMatchObject({
    ok: false,
    code: 'unknown_key',
  });
  expect(
    await createCheckpointVerifier({ keys: [{ ...other, kid: jwk.kid }] })(signed.jws),
  ).toMatchObject({ ok: false, code: 'bad_signature' });

  const verify = createCheckpointVerifier({ keys: [publicJwkOf(jwk)] });
  const [h, , s] = signed.jws.split('.');
  const altered = Buffer.from(
    JSON.stringify({ ...head, seq: 43, signedAt: now.toISOString() }),
  ).toString('base64url');
  expect(await verify(`${h}.${altered}.${s}`)).toMatchObject({ ok: false, code: 'bad_signature' });
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
