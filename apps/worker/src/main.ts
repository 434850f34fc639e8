import { ConfigError, parseConfig } from '@mtg/config';
import {
  ApplicationLoginError,
  checkApplicationLogin,
  checkSchemaVersion,
  createPool,
  MigrationChangedError,
  SchemaNotMigratedError,
} from '@mtg/db';
import { createLogger } from '@mtg/log';
import { startTracingFromEnv } from '@mtg/telemetry';
import { loadToolRegistry, RegistryError, TargetConfigError } from '@mtg/tools';
import { loadUpstreams, UpstreamConfigError } from '@mtg/upstreams';
import { buildWorker, servedTools } from './build-worker.ts';
import { WorkerSetupError } from './worker-setup-error.ts';
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
      warn: (message) => logger.warn(message),
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

  // Fail at start, with the reason, when the database is not migrated or the role is not
  // there, or when the login could become the owner.
  try {
    await checkSchemaVersion(config.DATABASE_URL);
  } catch (error) {
    if (error instanceof SchemaNotMigratedError || error instanceof MigrationChangedError) {
      process.stderr.write(`worker: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const probe = createPool({
    connectionString: config.DATABASE_URL,
    role: config.DATABASE_ROLE,
    max: 1,
    applicationName: config.workerId,
  });
  try {
    await checkApplicationLogin(probe, config.DATABASE_ROLE);
  } finally {
    await probe.end();
  }

  // Off unless OTEL_EXPORTER_OTLP_ENDPOINT is set; before the worker, so its fetch is traced.
  let tracing;
  try {
    tracing = await startTracingFromEnv(process.env, 'worker', config.workerId);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`worker: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
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
    await tracing?.shutdown();
    logger.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  // Started by the launcher, which has gone away without stopping us (e.g. SIGKILLed).
  process.on('disconnect', () => void stop('launcher gone'));

  await worker.start();
  const metricsUrl = worker.metricsUrl();
  logger.info('worker started', { health: worker.healthUrl() });
  process.send?.({
    type: 'ready',
    service: 'worker',
    workerId: config.workerId,
    healthUrl: worker.healthUrl(),
    ...(metricsUrl ? { url: metricsUrl } : {}),
  });
}

main().catch((error) => {
  if (error instanceof ApplicationLoginError) {
    process.stderr.write(`worker: ${error.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`worker: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
