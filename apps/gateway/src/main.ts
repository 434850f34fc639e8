import { ConfigError, parseConfig } from '@mtg/config';
import { createLogger } from '@mtg/log';
import { PolicyFileError } from '@mtg/policy';
import { loadToolRegistry, RegistryError } from '@mtg/tools';
import { UpstreamConfigError } from '@mtg/upstreams';
import { buildGateway } from './build-gateway.ts';
import { gatewayConfigSchema } from './config.ts';
import { serveUntilSignalled } from './serve.ts';

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
  });
  const gateway = await buildGateway(config, process.env, logger, { registry });
  await serveUntilSignalled(gateway.app, {
    port: config.GATEWAY_PORT,
    host: config.GATEWAY_HOST,
    logger,
    ready: { service: 'gateway', url: config.resource },
    onClose: () => gateway.close(),
    ...(gateway.tls ? { tls: gateway.tls } : {}),
  });
}

main().catch((error) => {
  if (
    error instanceof ConfigError ||
    error instanceof PolicyFileError ||
    error instanceof RegistryError ||
    error instanceof UpstreamConfigError
  ) {
    // Found while reading the files and packs the config names: no stack trace needed.
    process.stderr.write(`gateway: ${error.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`gateway: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
