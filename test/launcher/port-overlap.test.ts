// The launcher refuses a configuration in which two of the stack's processes (or the worker
// metrics range and any of them) would listen on one port, naming the variable; otherwise
// the second to bind fails its start with EADDRINUSE, far from the cause.
import { ConfigError, parseConfig } from '@mtg/config';
import { launcherConfigSchema } from '../../apps/cli/src/launcher/config.ts';

function refusal(env: Record<string, string>): Array<{ variable: string; message: string }> {
  try {
    parseConfig(launcherConfigSchema, env);
  } catch (error) {
    if (error instanceof ConfigError) return error.issues;
    throw error;
  }
  return [];
}

test('the defaults overlap nowhere, with or without an external database', () => {
  expect(refusal({})).toEqual([]);
  expect(
    refusal({ DATABASE_URL: 'postgres://x@127.0.0.1/x', WORKER_METRICS_PORT: '9610' }),
  ).toEqual([]);
});

test.each([
  [{ CONSOLE_PORT: '3000' }, 'CONSOLE_PORT', /3000 is also GATEWAY_PORT/],
  [{ UPSTREAM_DEMO_PORT: '9500' }, 'UPSTREAM_DEMO_PORT', /9500 is also DOWNSTREAM_PORT/],
  [{ GATEWAY_PORT: '9600' }, 'GATEWAY_PORT', /9600 is also UPSTREAM_DEMO_PORT/],
  [{ CONSOLE_PORT: '9400' }, 'CONSOLE_PORT', /9400 is also IDP_PORT/],
  [{ EMBEDDED_PG_PORT: '9700' }, 'CONSOLE_PORT', /9700 is also EMBEDDED_PG_PORT/],
  // Unset, the embedded PostgreSQL binds 54329 first (it starts before every other process).
  [{ GATEWAY_PORT: '54329' }, 'GATEWAY_PORT', /54329 is also EMBEDDED_PG_PORT/],
])('%j: refused, naming %s', (env, variable, message) => {
  const issues = refusal(env);
  expect(issues.map((i) => i.variable)).toEqual([variable]);
  expect(issues[0]!.message).toMatch(message);
});

test('with an external database the embedded default is no port of the stack', () => {
  expect(refusal({ DATABASE_URL: 'postgres://x@127.0.0.1/x', GATEWAY_PORT: '54329' })).toEqual([]);
});

test.each([
  [{ WORKERS: '2', WORKER_METRICS_PORT: '9599' }, /include UPSTREAM_DEMO_PORT/], // 9599-9600
  [{ WORKERS: '1', WORKER_METRICS_PORT: '9700' }, /include CONSOLE_PORT/],
  [{ WORKERS: '3', WORKER_METRICS_PORT: '54327' }, /include EMBEDDED_PG_PORT/],
  [
    { WORKERS: '2', WORKER_METRICS_PORT: '4000', EMBEDDED_PG_PORT: '4001' },
    /include EMBEDDED_PG_PORT/,
  ],
])('worker metrics range %j reaching a port of the stack is refused', (env, message) => {
  const issues = refusal(env);
  expect(issues.map((i) => i.variable)).toEqual(['WORKER_METRICS_PORT']);
  expect(issues[0]!.message).toMatch(message);
});
