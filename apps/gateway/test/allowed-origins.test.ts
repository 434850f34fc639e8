import { parseConfig } from '@mtg/config';
import { gatewayConfigSchema, LOOPBACK_ORIGINS } from '../src/config.ts';

const base = {
  DATABASE_URL: 'postgres://x',
  CLIENT_SECRET: 's',
  CREDENTIAL_KEY: Buffer.alloc(32, 1).toString('base64'),
};
const originsFor = (env: Record<string, string>) =>
  parseConfig(gatewayConfigSchema, { ...base, ...env }).allowedOrigins;

test('a gateway listening on loopback admits loopback origins on any port by default', () => {
  for (const host of ['127.0.0.1', 'localhost', '::1', '[::1]', '127.0.0.2'])
    expect(originsFor({ GATEWAY_HOST: host })).toEqual(LOOPBACK_ORIGINS);
  expect(originsFor({})).toEqual(LOOPBACK_ORIGINS);
});

test('a gateway listening beyond loopback admits only MCP Inspector origins by default', () => {
  expect(originsFor({ GATEWAY_HOST: '0.0.0.0' })).toEqual([
    'http://localhost:6274',
    'http://127.0.0.1:6274',
  ]);
});

test('ALLOWED_ORIGINS, when set, is the whole list', () => {
  expect(originsFor({ ALLOWED_ORIGINS: 'https://app.example' })).toEqual(['https://app.example']);
});
