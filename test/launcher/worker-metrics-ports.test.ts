// The launcher (scripts/start.ts) gives each worker its own metrics port. Checked by hand
// against a running `npm start` too (docs/operations.md); these pin the rule itself.
import { ConfigError, parseConfig } from '@mtg/config';
import { childEnv } from '../../apps/cli/src/launcher/child-env.ts';
import { launcherConfigSchema } from '../../apps/cli/src/launcher/config.ts';
import { generateDevSecrets } from '@mtg/dev-secrets';

const secrets = generateDevSecrets();

function workerEnvs(env: Record<string, string>) {
  const config = parseConfig(launcherConfigSchema, env);
  return Array.from({ length: config.WORKERS }, (_, i) =>
    childEnv('worker', {
      config,
      databaseUrls: {
        gateway: 'postgres://gateway@localhost/x',
        worker: 'postgres://worker@localhost/x',
        downstream: 'postgres://downstream@localhost/x',
      },
      secrets,
      dataDir: '/tmp/x',
      workerId: `worker-${i + 1}`,
      workerIndex: i + 1,
      // The launcher's own environment, which every child inherits.
      base: env,
    }),
  );
}

test('worker N gets WORKER_METRICS_PORT base + N - 1, so no two workers bind the same port', () => {
  const envs = workerEnvs({ WORKERS: '3', WORKER_METRICS_PORT: '9610' });
  expect(envs.map((e) => e.WORKER_METRICS_PORT)).toEqual(['9610', '9611', '9612']);
  expect(envs.map((e) => e.WORKER_ID)).toEqual(['worker-1', 'worker-2', 'worker-3']);
});

test('without a base (unset or 0) workers serve no metrics endpoint', () => {
  expect(workerEnvs({ WORKERS: '2' }).map((e) => e.WORKER_METRICS_PORT)).toEqual([
    undefined,
    undefined,
  ]);
  expect(
    workerEnvs({ WORKERS: '2', WORKER_METRICS_PORT: '0' }).map((e) => e.WORKER_METRICS_PORT),
  ).toEqual(['0', '0']);
});

test('a base whose range reaches a port of the stack or past 65535 is refused, naming WORKER_METRICS_PORT', () => {
  for (const env of [
    { WORKERS: '2', WORKER_METRICS_PORT: '2999' }, // 2999-3000: the gateway's 3000
    { WORKERS: '4', WORKER_METRICS_PORT: '9400' }, // the IdP's
    { WORKERS: '3', WORKER_METRICS_PORT: '65534' },
  ]) {
    expect(() => parseConfig(launcherConfigSchema, env)).toThrow(ConfigError);
    try {
      parseConfig(launcherConfigSchema, env);
    } catch (error) {
      expect((error as ConfigError).issues.map((i) => i.variable)).toEqual(['WORKER_METRICS_PORT']);
    }
  }
});
