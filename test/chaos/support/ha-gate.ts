import { haMissing } from '../../support/patroni-cluster.ts';

/**
 * The HA suites (a Patroni cluster each) run under `npm run test:failover` (HA_FAILOVER=1),
 * `npm run chaos`, or when named on jest's command line; skipped, saying why, when Patroni,
 * etcd or HAProxy is missing (.ci/install-ha.sh installs them).
 */
export async function haDescribe(file: string): Promise<jest.Describe> {
  const enabled =
    process.env.HA_FAILOVER === '1' ||
    process.env.CHAOS === '1' ||
    process.argv.some((a) => a.includes(file) || a.includes('test/chaos'));
  if (!enabled) return describe.skip;
  const missing = await haMissing();
  if (missing) {
    process.stderr.write(`${file} skipped: ${missing}\n`);
    return describe.skip;
  }
  return describe;
}
