import { readFile } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import type { JSONWebKeySet } from 'jose';
import { ConfigError, parseConfig } from '@mtg/config';
import {
  ApplicationLoginError,
  checkApplicationLogin,
  checkSchemaVersion,
  createPool,
  createReadPreferringPool,
  MigrationChangedError,
  SchemaNotMigratedError,
} from '@mtg/db';
import { createLogger } from '@mtg/log';
import { consoleConfigSchema } from './config.ts';
import { createConsole } from './create-console.ts';

async function main() {
  let config;
  try {
    config = parseConfig(consoleConfigSchema, process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`console: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const logger = createLogger('console', { level: config.LOG_LEVEL });
  // Its sessions and the queues views come with a migration: refuse an older database.
  await checkSchemaVersion(config.DATABASE_URL);
  const pool = createPool({
    connectionString: config.DATABASE_URL,
    role: config.DATABASE_ROLE,
    applicationName: 'console',
    max: 5,
  });
  // Refuse a login that could leave mtg_console (a superuser, the owner): the console reads.
  await checkApplicationLogin(pool, config.DATABASE_ROLE);
  // The pages' queries only read: with DATABASE_READ_URL, from the replica while it is fit
  // (its sessions stay on `pool`, the primary). Ending it ends `pool` too.
  const readPool = config.DATABASE_READ_URL
    ? createReadPreferringPool({
        primary: pool,
        replica: createPool({
          connectionString: config.DATABASE_READ_URL,
          role: config.DATABASE_ROLE,
          applicationName: 'console-read',
          max: 5,
        }),
        maxLagMs: config.DATABASE_READ_MAX_LAG_MS,
        onReplicaState: (state, error) =>
          state === 'up'
            ? logger.info('read replica in use')
            : logger.warn('read replica unusable: reading from the primary', {
                error: error?.message,
              }),
      })
    : undefined;
  // The public keys of the checkpoints, read on each use so a rotation needs no restart.
  const jwksFile =
    config.AUDIT_JWKS_FILE ??
    path.join(
      path.resolve(config.DATA_DIR ?? path.join(process.cwd(), '.data')),
      'audit',
      'jwks.json',
    );
  const checkpointKeys = async () => {
    try {
      return JSON.parse(await readFile(jwksFile, 'utf8')) as JSONWebKeySet;
    } catch {
      return undefined;
    }
  };
  const server = http.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.CONSOLE_PORT, config.CONSOLE_HOST, () => resolve());
  });
  const { port } = server.address() as { port: number };
  const url = config.CONSOLE_URL ?? `http://${config.CONSOLE_HOST}:${port}`;
  const { app } = createConsole({
    pool,
    ...(readPool ? { readPool } : {}),
    logger,
    baseUrl: url,
    issuer: config.issuer,
    clientId: config.CONSOLE_CLIENT_ID,
    ...(config.CONSOLE_CLIENT_SECRET ? { clientSecret: config.CONSOLE_CLIENT_SECRET } : {}),
    gatewayResource: config.gatewayResource,
    approvalScopes: config.CONSOLE_APPROVAL_SCOPES.split(/\s+/).filter(Boolean),
    checkpointKeys,
    sessionKeys: config.sessionKeys,
    sessionIdleSeconds: config.CONSOLE_SESSION_IDLE_SECONDS,
    ...(config.CONSOLE_METRICS_URLS ? { metricsEndpoints: config.CONSOLE_METRICS_URLS } : {}),
    ...(config.METRICS_TOKEN ? { metricsToken: config.METRICS_TOKEN } : {}),
  });
  server.on('request', app);
  logger.info('listening', { url });
  process.send?.({ type: 'ready', service: 'console', url });

  let stopping = false;
  const stop = (reason: string) => {
    if (stopping) return;
    stopping = true;
    logger.info('stopping', { reason });
    server.close(() => void (readPool ?? pool).end().then(() => process.exit(0)));
    server.closeIdleConnections();
    setTimeout(() => server.closeAllConnections(), 5_000).unref();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('disconnect', () => stop('launcher gone'));
}

main().catch((error) => {
  if (
    error instanceof ApplicationLoginError ||
    error instanceof SchemaNotMigratedError ||
    error instanceof MigrationChangedError
  ) {
    process.stderr.write(`console: ${error.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`console: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
