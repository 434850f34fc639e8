import { ConfigError, parseConfig } from '@mtg/config';
import { createPool } from '@mtg/db';
import { createLogger } from '@mtg/log';
import { loadToolRegistry, RegistryError, TargetConfigError } from '@mtg/tools';
import { loadUpstreams, UpstreamConfigError } from '@mtg/upstreams';
import { buildWorker, servedTools } from './build-worker.ts';
import { WorkerSetupError } from './worker-setup-error.ts';
import { checkDatabase } from './check-database.ts';
import { workerConfigSchema } from './worker-config.ts';

async function main() {
  let config;
  try {
    config = parseConfig(workerConfigSchema, process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`worker: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const logger = createLogger('worker', { level: config.LOG_LEVEL }).child({
    workerId: config.workerId,
  });

  // The packs first: a bad pack or configuration stops the worker before it connects anywhere.
  let registry;
  try {
    registry = await loadToolRegistry({
      packs: config.TOOL_PACKS,
      env: process.env,
      limits: config.TOOL_LIMITS,
    });
    servedTools(registry, config.WORKER_TOOLS);
    loadUpstreams(config.UPSTREAMS_FILE);
  } catch (error) {
    if (
      error instanceof RegistryError ||
      error instanceof WorkerSetupError ||
      error instanceof UpstreamConfigError
    ) {
      process.stderr.write(`worker: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }

  // Fail at start, with the reason, when the database or the role is not there.
  const probe = createPool({
    connectionString: config.DATABASE_URL,
    role: config.DATABASE_ROLE,
    max: 1,
    applicationName: config.workerId,
  });
  try {
    await checkDatabase(probe, config.DATABASE_ROLE);
  } finally {
    await probe.end();
  }

  let worker;
  try {
    worker = await buildWorker(config, registry, logger);
  } catch (error) {
    if (
      error instanceof WorkerSetupError ||
      error instanceof TargetConfigError ||
      error instanceof UpstreamConfigError
    ) {
      process.stderr.write(`worker: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  let stopping = false;
  const stop = async (reason: string) => {
    if (stopping) return;
    stopping = true;
    logger.info('stopping', { reason });
    await worker.stop();
    logger.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  // Started by the launcher, which has gone away without stopping us (e.g. SIGKILLed).
  process.on('disconnect', () => void stop('launcher gone'));

  await worker.start();
  logger.info('worker started');
  const metricsUrl = worker.metricsUrl();
  process.send?.({
    type: 'ready',
    service: 'worker',
    workerId: config.workerId,
    ...(metricsUrl ? { url: metricsUrl } : {}),
  });
}

main().catch((error) => {
  process.stderr.write(`worker: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
