import { describe, expect, test } from '@jest/globals';
import {
  bearerChallenge,
  extractBearer,
  hasScopes,
  metadataUrlsFor,
  protectedResourceMetadata,
} from '../src/index.ts';

const META = 'https://gw.example.com/.well-known/oauth-protected-resource/mcp';

describe('bearerChallenge', () => {
  test('no token at all: no error attribute, only where the metadata is', () => {
    expect(bearerChallenge({ resourceMetadataUrl: META })).toBe(
      `Bearer resource_metadata="${META}"`,
    );
  });

  test('a description without an error is not sent (RFC 6750 §3.1)', () => {
    expect(bearerChallenge({ resourceMetadataUrl: META, description: 'missing token' })).toBe(
      `Bearer resource_metadata="${META}"`,
    );
  });

  test('a refused token', () => {
    expect(
      bearerChallenge({
        error: 'invalid_token',
        description: 'the token has expired',
        resourceMetadataUrl: META,
      }),
    ).toBe(
      `Bearer error="invalid_token", error_description="the token has expired", resource_metadata="${META}"`,
    );
  });

  test('insufficient scope names the scopes to ask for, with a realm', () => {
    expect(
      bearerChallenge({
        realm: 'mcp',
        error: 'insufficient_scope',
        description: 'tool provision_test_environment requires scope env:provision',
        scope: ['env:provision', 'tasks:admin'],
        resourceMetadataUrl: META,
      }),
    ).toBe(
      'Bearer realm="mcp", error="insufficient_scope", ' +
        'error_description="tool provision_test_environment requires scope env:provision", ' +
        `scope="env:provision tasks:admin", resource_metadata="${META}"`,
    );
  });

  test('quotes and backslashes are escaped in quoted strings, kept out of descriptions', () => {
    expect(
      bearerChallenge({
        realm: 'a "b" \\c',
        error: 'invalid_token',
        description: 'missing tenant claim: "tenant"\r\nSet-Cookie: x=1 \\ é',
        resourceMetadataUrl: META,
      }),
    ).toBe(
      'Bearer realm="a \\"b\\" \\\\c", error="invalid_token", ' +
        `error_description="missing tenant claim: 'tenant'??Set-Cookie: x=1 ? ?", ` +
        `resource_metadata="${META}"`,
    );
  });

  test('refuses values that cannot be a header (a bug, not a client error)', () => {
    expect(() => bearerChallenge({ resourceMetadataUrl: `${META}\r\nX: y` })).toThrow(TypeError);
    expect(() =>
      bearerChallenge({ error: 'insufficient_scope', scope: ['a b'], resourceMetadataUrl: META }),
    ).toThrow(TypeError);
  });
});

describe('protectedResourceMetadata', () => {
  test('is the RFC 9728 document, header bearer tokens only', () => {
    expect(
      protectedResourceMetadata({
        resource: 'https://gw.example.com/mcp',
        authorizationServers: ['https://idp.example.com'],
        scopesSupported: ['env:provision', 'reports:run'],
        resourceName: 'MCP task gateway',
        documentation: 'https://gw.example.com/docs',
      }),
    ).toEqual({
      resource: 'https://gw.example.com/mcp',
      authorization_servers: ['https://idp.example.com'],
      scopes_supported: ['env:provision', 'reports:run'],
      bearer_methods_supported: ['header'],
      resource_name: 'MCP task gateway',
      resource_documentation: 'https://gw.example.com/docs',
    });
  });

  test('omits optional members that were not given', () => {
    expect(
      Object.keys(
        protectedResourceMetadata({
          resource: 'https://gw.example.com/mcp',
          authorizationServers: ['https://idp.example.com'],
          scopesSupported: [],
        }),
      ),
    ).toEqual([
      'resource',
      'authorization_servers',
      'scopes_supported',
      'bearer_methods_supported',
    ]);
  });

  test('needs an authorization server and a fragment-free resource URL', () => {
    const base = { scopesSupported: [], authorizationServers: ['https://idp.example.com'] };
    expect(() =>
      protectedResourceMetadata({
        ...base,
        authorizationServers: [],
        resource: 'https://gw.example.com/mcp',
      }),
    ).toThrow(TypeError);
    expect(() =>
      protectedResourceMetadata({ ...base, resource: 'https://gw.example.com/mcp#x' }),
    ).toThrow(TypeError);
    expect(() => protectedResourceMetadata({ ...base, resource: 'mcp' })).toThrow(TypeError);
  });
});

describe('metadataUrlsFor', () => {
  test('a resource with a path: the path-specific URL first, then the root one', () => {
    expect(metadataUrlsFor('https://gw.example.com/mcp')).toEqual([
      'https://gw.example.com/.well-known/oauth-protected-resource/mcp',
      'https://gw.example.com/.well-known/oauth-protected-resource',
    ]);
    expect(metadataUrlsFor('http://127.0.0.1:3000/tenant/mcp')).toEqual([
      'http://127.0.0.1:3000/.well-known/oauth-protected-resource/tenant/mcp',
      'http://127.0.0.1:3000/.well-known/oauth-protected-resource',
    ]);
  });

  test('a resource without a path (trailing slash or not) has one URL', () => {
    for (const resource of ['https://gw.example.com', 'https://gw.example.com/']) {
      expect(metadataUrlsFor(resource)).toEqual([
        'https://gw.example.com/.well-known/oauth-protected-resource',
      ]);
    }
  });
});

describe('extractBearer', () => {
  test.each([
    ['Bearer abc.def.ghi', 'abc.def.ghi'],
    ['bearer abc.def.ghi', 'abc.def.ghi'],
    ['BEARER  abc.def-_~+/ghi==', 'abc.def-_~+/ghi=='],
    [['Bearer abc'], 'abc'],
  ])('%j → the token', (header, token) => {
    expect(extractBearer(header)).toEqual({ ok: true, token });
  });

  test.each([
    [undefined],
    [''],
    ['   '],
    [[]],
    // RFC 6750 §3.1: another scheme is no bearer credentials, not a bad one
    ['Basic YWxpY2U6c2VjcmV0'],
    ['DPoP abc.def.ghi'],
    ['Bearerabc'],
  ])('%j → missing', (header) => {
    expect(extractBearer(header)).toEqual({ ok: false, code: 'missing' });
  });

  test.each([
    ['Bearer'],
    ['Bearer '],
    ['Bearer abc def'],
    ['Bearer abc, Basic xyz'],
    ['Bearer "abc"'],
    ['Bearer a=bc'],
    [['Bearer abc', 'Bearer def']],
  ])('%j → malformed', (header) => {
    expect(extractBearer(header)).toEqual({ ok: false, code: 'malformed' });
  });
});

describe('hasScopes', () => {
  const principal = { scopes: ['env:provision', 'reports:run'] };
  test('holds every needed scope, or not', () => {
    expect(hasScopes(principal, ['env:provision'])).toBe(true);
    expect(hasScopes(principal, ['env:provision', 'reports:run'])).toBe(true);
    expect(hasScopes(principal, ['env:provision', 'tasks:admin'])).toBe(false);
    expect(hasScopes(principal, [])).toBe(true);
    expect(hasScopes({ scopes: [] }, ['env:provision'])).toBe(false);
  });
});
