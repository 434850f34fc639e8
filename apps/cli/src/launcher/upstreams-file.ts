import { writeFile } from 'node:fs/promises';
import type { Logger } from '@mtg/log';
import { demoUpstreamsFile, demoUpstreamsYaml } from './child-env.ts';
import type { LauncherConfig } from './config.ts';

/**
 * The UPSTREAMS_FILE the stack runs with: the operator's when set, else the demo upstream's,
 * written into the data directory. The operator's file replaces the demo registration (the
 * demo server still runs, unregistered), so its `demo.` tools and the `upstream:demo` scope
 * are gone; said at start, since nothing else would tell why they vanished.
 */
export async function chooseUpstreamsFile(options: {
  env: NodeJS.ProcessEnv;
  dataDir: string;
  config: Pick<LauncherConfig, 'UPSTREAM_DEMO_PORT'>;
  logger: Pick<Logger, 'info'>;
}): Promise<string> {
  const own = options.env.UPSTREAMS_FILE;
  if (own) {
    options.logger.info(
      `UPSTREAMS_FILE ${own}: its upstreams are registered; the demo upstream is not ` +
        '(no demo.* tools, no upstream:demo scope)',
      { upstreamsFile: own },
    );
    return own;
  }
  const file = demoUpstreamsFile(options.dataDir);
  await writeFile(file, demoUpstreamsYaml(options.config));
  return file;
}
