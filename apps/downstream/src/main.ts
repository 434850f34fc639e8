import { createRemoteJWKSet } from 'jose';
import { ConfigError, parseConfig } from '@mtg/config';
import { ApplicationLoginError, checkApplicationLogin, createPool } from '@mtg/db';
import { serveUntilSignalled } from '@mtg/http-serve';
import { createLogger } from '@mtg/log';
import { downstreamConfigSchema } from './config.ts';
import { createApp } from './create-app.ts';
import { createFaults } from './api/faults.ts';

async function main() {
  let config;
  try {
    config = parseConfig(downstreamConfigSchema, process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`downstream: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const logger = createLogger('downstream', { level: config.LOG_LEVEL });
  const pool = createPool({
    connectionString: config.DATABASE_URL,
    role: config.DATABASE_ROLE,
    applicationName: 'downstream',
  });
  // Fail at start, not at the first request, when the role is missing or not granted, or
  // the login could become the owner.
  await checkApplicationLogin(pool, config.DATABASE_ROLE);
  // Fetched on first use, so the IdP need not be up yet.
  const keys = createRemoteJWKSet(new URL(config.jwksUri));
  const app = createApp({
    pool,
    logger,
    auth: { keys, issuer: config.issuer, audience: config.audience },
    ...(config.DOWNSTREAM_FAULTS === 'enabled' ? { faults: createFaults() } : {}),
  });
  if (config.DOWNSTREAM_FAULTS === 'enabled')
    logger.warn('fault injection enabled: POST /_faults changes how /api answers');
  await serveUntilSignalled(app, {
    port: config.DOWNSTREAM_PORT,
    host: config.DOWNSTREAM_HOST,
    logger,
    service: 'downstream',
    onClose: () => pool.end(),
  });
}

main().catch((error) => {
  if (error instanceof ApplicationLoginError) {
    process.stderr.write(`downstream: ${error.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`downstream: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
