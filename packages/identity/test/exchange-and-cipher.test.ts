import { randomBytes } from 'node:crypto';
import { createCredentialCipher, exchangeParameters } from '../src/index.ts';

const request = {
  subjectToken: 'SUBJECT',
  actorToken: 'ACTOR',
  target: 'https://api.example/',
  scope: ['records:write'],
  ttlSeconds: 90,
};

test('RFC 8693 with a resource indicator (dev IdP, oidc-provider)', () => {
  expect(exchangeParameters('rfc8693-resource', request)).toEqual({
    grantType: 'urn:ietf:params:oauth:grant-type:token-exchange',
    params: {
      subject_token: 'SUBJECT',
      subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      requested_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      resource: 'https://api.example/',
      scope: 'records:write',
      actor_token: 'ACTOR',
      actor_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      ttl: '90',
    },
  });
});

test('RFC 8693 with audience (Keycloak, Okta, Auth0 on-behalf-of) names no resource', () => {
  const { params } = exchangeParameters('rfc8693-audience', request);
  expect(params.audience).toBe('https://api.example/');
  expect(params.resource).toBeUndefined();
});

test('Entra on-behalf-of is a jwt-bearer grant with requested_token_use, not RFC 8693', () => {
  expect(exchangeParameters('entra-obo', { ...request, scope: [] })).toEqual({
    grantType: 'urn:ietf:params:oauth:grant-type:jwt-bearer',
    params: {
      assertion: 'SUBJECT',
      requested_token_use: 'on_behalf_of',
      scope: 'https://api.example/.default',
    },
  });
});

test('a sealed credential opens only for the task it is bound to', () => {
  const cipher = createCredentialCipher({ k1: randomBytes(32) }, 'k1');
  const sealed = cipher.seal('delegation-token', 'task-a');
  expect(sealed.ciphertext.toString()).not.toContain('delegation-token');
  expect(cipher.open(sealed, 'task-a')).toBe('delegation-token');
  expect(() => cipher.open(sealed, 'task-b')).toThrow();
});

test('key rotation: the new current key seals, the old key still opens what it sealed', () => {
  const k1 = randomBytes(32);
  const k2 = randomBytes(32);
  const before = createCredentialCipher({ k1 }, 'k1').seal('old', 't');
  const after = createCredentialCipher({ k1, k2 }, 'k2');
  expect(after.seal('new', 't').keyId).toBe('k2');
  expect(after.open(before, 't')).toBe('old');
  expect(() => createCredentialCipher({ k2 }, 'k2').open(before, 't')).toThrow(/unknown key k1/);
});

test('a key that is not 32 bytes is refused', () => {
  expect(() => createCredentialCipher({ k1: randomBytes(16) }, 'k1')).toThrow(/32 bytes/);
});
