import { readFile } from 'node:fs/promises';
import { ConfigError, parseConfig } from '@mtg/config';
import { idpConfigSchema } from '../src/config.ts';

// The IdP reads TARGETS_FILE and UPSTREAMS_FILE (their audiences and scopes are resources it
// issues tokens for) through its schema like every other setting, so a bad value is refused
// at start naming the variable, not read raw where it is used.
test('TARGETS_FILE and UPSTREAMS_FILE are settings of the schema', () => {
  expect(
    parseConfig(idpConfigSchema, { TARGETS_FILE: '/etc/t.yaml', UPSTREAMS_FILE: '/etc/u.yaml' }),
  ).toMatchObject({ TARGETS_FILE: '/etc/t.yaml', UPSTREAMS_FILE: '/etc/u.yaml' });
  const unset = parseConfig(idpConfigSchema, {});
  expect([unset.TARGETS_FILE, unset.UPSTREAMS_FILE]).toEqual([undefined, undefined]);
  for (const variable of ['TARGETS_FILE', 'UPSTREAMS_FILE']) {
    try {
      parseConfig(idpConfigSchema, { [variable]: '' });
      throw new Error(`${variable}='' was accepted`);
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).issues.map((i) => i.variable)).toEqual([variable]);
    }
  }
});

test('main.ts reads no variable of the environment but through the schema', async () => {
  const main = await readFile(new URL('../src/main.ts', import.meta.url), 'utf8');
  // The tool registry is given the whole environment (each pack reads its own settings).
  expect(main.match(/process\.env\.[A-Z_]+/g) ?? []).toEqual([]);
});
