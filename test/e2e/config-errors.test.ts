// Every environment variable of the gateway and the worker goes through the process's zod
// schema: a bad credential key or claim mapping stops the process at start with exit status
// 2 and a message naming the variable, like any other configuration error — no stack trace,
// and before it connects anywhere.
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { ConfigError, parseConfig } from '@mtg/config';
import { gatewayConfigSchema } from '../../apps/gateway/src/config.ts';
import { workerConfigSchema } from '../../apps/worker/src/worker-config.ts';

const key = () => randomBytes(32).toString('base64');
const short = randomBytes(16).toString('base64');
// Nothing listens on port 1: a process that got past its config fails to connect instead.
const base = { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', CLIENT_SECRET: 'secret' };

const bad: Array<[string, Record<string, string>, string]> = [
  ['CREDENTIAL_KEYS without ids', { CREDENTIAL_KEYS: 'nonsense' }, 'CREDENTIAL_KEYS'],
  ['CREDENTIAL_KEYS with a short key', { CREDENTIAL_KEYS: `k1:${short}` }, 'CREDENTIAL_KEYS'],
  [
    'CREDENTIAL_KEYS listing an id twice',
    { CREDENTIAL_KEYS: `k1:${key()},k1:${key()}` },
    'CREDENTIAL_KEYS',
  ],
  ['CREDENTIAL_KEY that is not base64', { CREDENTIAL_KEY: 'not a key!' }, 'CREDENTIAL_KEY'],
  ['CREDENTIAL_KEY of 16 bytes', { CREDENTIAL_KEY: short }, 'CREDENTIAL_KEY'],
  [
    'CREDENTIAL_KEY_CURRENT naming no key',
    { CREDENTIAL_KEYS: `k1:${key()},k2:${key()}`, CREDENTIAL_KEY_CURRENT: 'k9' },
    'CREDENTIAL_KEY_CURRENT',
  ],
];

function variablesOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (error) {
    if (error instanceof ConfigError) return error.issues.map((i) => i.variable);
    throw error;
  }
  return [];
}

describe.each([
  ['gateway', gatewayConfigSchema],
  ['worker', workerConfigSchema],
] as const)('%s configuration', (_name, schema) => {
  test.each(bad)('%s is refused, naming the variable', (_case, env, variable) => {
    expect(variablesOf(() => parseConfig(schema, { ...base, ...env }))).toEqual([variable]);
  });

  test('a valid key set is parsed once, into the keys and the current one', () => {
    const [k1, k2] = [randomBytes(32), randomBytes(32)];
    const config = parseConfig(schema, {
      ...base,
      CREDENTIAL_KEYS: `k1:${k1.toString('base64')}, k2:${k2.toString('base64')}`,
      CREDENTIAL_KEY_CURRENT: 'k2',
    });
    expect(config.credentialKeys).toEqual({ keys: { k1, k2 }, current: 'k2' });
    const single = parseConfig(schema, { ...base, CREDENTIAL_KEY: k1.toString('base64') });
    expect(single.credentialKeys).toEqual({ keys: { k1 }, current: 'k1' });
  });
});

test('the gateway reads the claim mapping, AUTH_TENANT_FIXED included, through its schema', () => {
  const env = { ...base, CREDENTIAL_KEY: key() };
  expect(
    variablesOf(() => parseConfig(gatewayConfigSchema, { ...env, AUTH_CLAIM_SCOPES: 'scp' })),
  ).toEqual(['AUTH_CLAIM_SCOPES']);
  expect(
    variablesOf(() => parseConfig(gatewayConfigSchema, { ...env, AUTH_TENANT_FIXED: ' ' })),
  ).toEqual(['AUTH_TENANT_FIXED']);
  const config = parseConfig(gatewayConfigSchema, { ...env, AUTH_TENANT_FIXED: 'acme' });
  expect(config.claims.tenant).toMatchObject({ claim: [], fixed: 'acme' });
});

test('a pool too small for what the process holds at once is refused, naming the variable', () => {
  const env = { ...base, CREDENTIAL_KEY: key() };
  // A worker always holds one session for the maintenance leader's lock or its wait.
  expect(
    variablesOf(() => parseConfig(workerConfigSchema, { ...env, DATABASE_POOL_MAX: '2' })),
  ).toEqual(['DATABASE_POOL_MAX']);
  expect(
    variablesOf(() => parseConfig(gatewayConfigSchema, { ...env, DATABASE_POOL_MAX: '1' })),
  ).toEqual(['DATABASE_POOL_MAX']);
  expect(
    parseConfig(workerConfigSchema, { ...env, DATABASE_POOL_MAX: '3' }).DATABASE_POOL_MAX,
  ).toBe(3);
  expect(parseConfig(workerConfigSchema, env).DATABASE_POOL_MAX).toBeUndefined();
  expect(parseConfig(gatewayConfigSchema, env).DATABASE_POOL_MAX).toBe(10);
});

function runMain(app: 'gateway' | 'worker', env: Record<string, string>) {
  const main = fileURLToPath(new URL(`../../apps/${app}/src/main.ts`, import.meta.url));
  const child = fork(main, [], {
    execArgv: [],
    env: { PATH: process.env.PATH ?? '', ...base, ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdout!.resume();
  return new Promise<{ code: number | null; stderr: string }>((resolve) =>
    child.once('exit', (code) => resolve({ code, stderr })),
  );
}

test.each(['gateway', 'worker'] as const)(
  'the %s process given a bad CREDENTIAL_KEYS exits 2 naming it, without a stack trace',
  async (app) => {
    const { code, stderr } = await runMain(app, { CREDENTIAL_KEYS: `k1:${short}` });
    expect({ code, stderr }).toEqual({
      code: 2,
      stderr: expect.stringContaining(`${app}: invalid configuration:\n  CREDENTIAL_KEYS: entry 1`),
    });
    expect(stderr).not.toMatch(/TypeError|\n\s+at /);
  },
);
