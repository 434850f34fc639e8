import { createPool } from '@mtg/db';
import { claimMappingFromEnv, createKeySource } from '@mtg/identity';
import type { Logger } from '@mtg/log';
import { CHANNELS, createBoss, createJobQueue, createTaskEvents, createTaskService } from '@mtg/tasks';
import { createCatalogue, demoTools, whoami } from '@mtg/tools';
import type { Express } from 'express';
import type { GatewayConfig } from './config.ts';
import { createApp } from './create-app.ts';
import { discoverJwksUri } from './discover-jwks-uri.ts';
import { jobTools } from './mcp/job-tools.ts';

export const SCOPES = ['env:provision', 'reports:run', 'records:write', 'tasks:admin'];

export interface Gateway {
  app: Express;
  close(): Promise<void>;
}

/** Wires one gateway replica from its config: database, queue, keys, tools, service, app. */
export async function buildGateway(
  config: GatewayConfig,
  env: Record<string, string | undefined>,
  logger: Logger,
): Promise<Gateway> {
  const pool = createPool({
    connectionString: config.DATABASE_URL,
    role: config.DATABASE_ROLE,
    applicationName: 'gateway',
    max: 20,
  });
  const boss = createBoss(pool, { supervise: false });
  boss.on('error', (error: Error) => logger.warn('pg-boss error', { error: error.message }));
  await boss.start();
  const events = await createTaskEvents(config.DATABASE_URL, [CHANNELS.settled], (error) =>
    logger.warn('task events connection error', { error: error.message }),
  );

  const jwksUri = config.AUTH_JWKS_URI ?? (await discoverWithRetry(config.issuer, logger));
  const keys = createKeySource({
    jwksUri,
    onError: (error) => logger.warn('jwks refresh failed', { error: error.message }),
  });
  await keys.start();

  const longTools = demoTools(config.TOOL_LIMITS);
  const tasks = createTaskService({
    pool,
    queue: createJobQueue(boss),
    events,
    tools: longTools,
    limits: {
      maxActivePerUser: config.MAX_ACTIVE_TASKS_PER_USER,
      maxActivePerTenant: config.MAX_ACTIVE_TASKS_PER_TENANT,
      derivedDedupeWindowMs: config.DERIVED_DEDUPE_WINDOW_MS,
      pollIntervalMs: config.TASK_POLL_INTERVAL_MS,
    },
    statusReadSampleRate: config.STATUS_READ_AUDIT_SAMPLE_RATE,
    cancelAckTimeoutMs: config.CANCEL_ACK_TIMEOUT_MS,
  });

  const app = createApp({
    resource: config.resource,
    issuer: config.issuer,
    verify: {
      keys: keys.getKey,
      issuer: config.issuer,
      audience: config.resource,
      algorithms: config.AUTH_ALGORITHMS,
      clockToleranceSec: config.AUTH_CLOCK_TOLERANCE_SECONDS,
      ...(config.AUTH_REQUIRED_TYP ? { requiredTyp: config.AUTH_REQUIRED_TYP as 'at+jwt' } : {}),
      claims: claimMappingFromEnv(env),
    },
    keysReady: keys.ready,
    pool,
    catalogue: createCatalogue([whoami, ...jobTools(tasks)]),
    longTools,
    tasks,
    resultWaitMs: config.TASK_RESULT_WAIT_MS,
    logger,
    allowedHosts: config.allowedHosts,
    allowedOrigins: config.ALLOWED_ORIGINS,
    maxBodyBytes: config.MAX_BODY_BYTES,
    scopesSupported: SCOPES,
  });

  return {
    app,
    async close() {
      keys.stop();
      await events.close();
      await boss.stop({ graceful: false, close: false }).catch(() => {});
      await pool.end();
    },
  };
}

async function discoverWithRetry(issuer: string, logger: Logger): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await discoverJwksUri(issuer);
    } catch (error) {
      if (attempt >= 30) throw error;
      logger.warn('authorization server metadata not reachable yet', {
        issuer,
        attempt,
        error: error instanceof Error ? error.message : String(error),
      });
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}
