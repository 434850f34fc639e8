// `npm start`: the whole stack on one machine (docs/operations.md).
import { ConfigError, parseConfig } from '@mtg/config';
import { createLogger } from '@mtg/log';
import { RegistryError } from '@mtg/tools';
import { dataDir, loadOrCreateDevSecrets } from '@mtg/dev-secrets';
import { launcherConfigSchema } from '../launcher/config.ts';
import { projectPack } from '../launcher/project-pack.ts';
import { createStack, StackStoppedError } from '../launcher/stack.ts';
import { exitWhenWritten } from '../lib/exit-when-written.ts';

/** A repeated signal within this window is the same Ctrl-C: npm forwards it a second time. */
const SAME_SIGNAL_MS = 1_000;

async function main(): Promise<number> {
  let config;
  try {
    config = parseConfig(launcherConfigSchema, process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`start: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
  const logger = createLogger('launcher', { level: config.LOG_LEVEL });
  // Run inside a team's pack, `dev` serves that pack (every child reads TOOL_PACKS).
  const pack = process.env.TOOL_PACKS ? undefined : projectPack(process.cwd());
  if (pack) {
    process.env.TOOL_PACKS = pack.entry;
    logger.info('serving the pack of this project', { pack: pack.name, entry: pack.entry });
  }
  const root = dataDir({ DATA_DIR: config.DATA_DIR });
  const stack = createStack({
    config,
    secrets: await loadOrCreateDevSecrets(root),
    dataDir: root,
    logger,
  });

  let firstSignalAt = 0;
  const onSignal = (signal: string) => {
    if (!firstSignalAt) {
      firstSignalAt = performance.now();
      logger.info('stopping the stack', { signal });
      void stack.stop(0);
    } else if (performance.now() - firstSignalAt > SAME_SIGNAL_MS) {
      logger.warn('second signal: killing everything now', { signal });
      stack.force();
      process.exit(130);
    }
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // The terminal went away.
  process.on('SIGHUP', onSignal);
  process.on('exit', stack.killAllSync);
  // `npm start` runs us under `sh -c`; a SIGTERM to npm kills that shell without passing
  // the signal on. Stop when orphaned rather than keep the stack running unowned.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent && !firstSignalAt) onSignal('parent exited');
  }, 1000).unref();

  try {
    const info = await stack.start();
    process.stdout.write(
      `ready: mcp=${info.mcp} idp=${info.idp} downstream=${info.downstream} console=${info.console} ` +
        `workers=${info.workers} database=${info.database}\n`,
    );
    // A line of its own: tools parse the `ready:` line, whose fields stay as they are.
    if (info.metrics.length)
      process.stdout.write(
        `metrics: ${info.metrics.map((m) => `${m.process}=${m.url}`).join(' ')}\n`,
      );
    process.send?.({ type: 'ready', service: 'stack', url: info.mcp });
  } catch (error) {
    if (!(error instanceof StackStoppedError)) {
      process.stderr.write(`start: ${error instanceof Error ? error.message : String(error)}\n`);
      logger.error('the stack failed to start; stopping');
      // A pack the registry refuses (missing, built for another kit, misconfigured) is the
      // operator's to fix, as in the gateway and the workers: exit 2.
      void stack.stop(error instanceof RegistryError ? 2 : 1);
    }
  }
  return stack.done;
}

main().then(
  (code) => exitWhenWritten(code),
  (error: unknown) => {
    process.stderr.write(`start: ${error instanceof Error ? error.stack : String(error)}\n`);
    exitWhenWritten(1);
  },
);
