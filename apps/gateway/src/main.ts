import { ConfigError, parseConfig } from '@mtg/config';
import { serveUntilSignalled } from '@mtg/http-serve';
import {
  ApplicationLoginError,
  checkSchemaVersion,
  MigrationChangedError,
  SchemaNotMigratedError,
} from '@mtg/db';
import { createLogger } from '@mtg/log';
import { PolicyFileError } from '@mtg/policy';
import { startTracingFromEnv } from '@mtg/telemetry';
import { loadToolRegistry, RegistryError } from '@mtg/tools';
import { loadUpstreams, UpstreamConfigError } from '@mtg/upstreams';
import { buildGateway } from './build-gateway.ts';
import { gatewayConfigSchema } from './config.ts';
import { createGatewayServer } from './tls.ts';

async function main() {
  let config;
  try {
    config = parseConfig(gatewayConfigSchema, process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`gateway: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const logger = createLogger('gateway', { level: config.LOG_LEVEL });
  const registry = await loadToolRegistry({
    packs: config.TOOL_PACKS,
    env: process.env,
    limits: config.TOOL_LIMITS,
    warn: (message) => logger.warn(message),
  });
  // Files before connections: a bad UPSTREAMS_FILE is named before the database is asked.
  loadUpstreams(config.UPSTREAMS_FILE);
  await checkSchemaVersion(config.DATABASE_URL);
  // Off unless OTEL_EXPORTER_OTLP_ENDPOINT is set (docs/operations.md, "Tracing").
  const tracing = await startTracingFromEnv(process.env, 'gateway');
  const gateway = await buildGateway(config, logger, { registry });
  await serveUntilSignalled(gateway.app, {
    port: config.GATEWAY_PORT,
    host: config.GATEWAY_HOST,
    logger,
    service: 'gateway',
    url: config.resource,
    onClose: async () => {
      await gateway.close();
      await tracing?.shutdown();
    },
    // HTTPS when the config names a certificate (tls.ts), plain HTTP behind a proxy.
    createServer: (listener) => createGatewayServer(listener, gateway.tls),
  });
}

main().catch((error) => {
  if (
    error instanceof ConfigError ||
    error instanceof PolicyFileError ||
    error instanceof RegistryError ||
    error instanceof ApplicationLoginError ||
    error instanceof SchemaNotMigratedError ||
    error instanceof MigrationChangedError ||
    error instanceof UpstreamConfigError
  ) {
    // Found while reading the files and packs the config names (TLS, policy, TOOL_PACKS) or
    // checking its database login: no stack trace needed.
    process.stderr.write(`gateway: ${error.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`gateway: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
