import { createPool } from '@mtg/db';
import { clientCredentialsToken, createCredentialCipher, createTokenExchanger, credentialKeysFromEnv } from '@mtg/identity';
import type { Logger } from '@mtg/log';
import { createMaintenance, createTaskCredentials, createWorkerLoop } from '@mtg/runner';
import { CHANNELS, createBoss, createTaskEvents } from '@mtg/tasks';
import { createDownstreamClient, demoTools } from '@mtg/tools';
import type { WorkerConfig } from './worker-config.ts';

export interface Worker {
  start(): Promise<void>;
  /** Graceful: running tasks stop at their next boundary and are released for others. */
  stop(): Promise<void>;
  running(): number;
}

/** Wires one worker process: database, queue, notifications, downstream credentials, loop. */
export async function buildWorker(
  config: WorkerConfig,
  logger: Logger,
  env: Record<string, string | undefined> = process.env,
): Promise<Worker> {
  const pool = createPool({
    connectionString: config.DATABASE_URL,
    role: config.DATABASE_ROLE,
    applicationName: config.workerId,
    max: Math.min(config.WORKER_CONCURRENCY + 5, 40),
  });
  const boss = createBoss(pool, { supervise: true });
  boss.on('error', (error: Error) => logger.warn('pg-boss error', { error: error.message }));
  await boss.start();
  const events = await createTaskEvents(
    config.DATABASE_URL,
    [CHANNELS.created, CHANNELS.control],
    (error) => logger.warn('task events connection error', { error: error.message }),
  );
  // The worker's own (workload) token: only ever the actor_token of an exchange, never a
  // credential for user work (the downstream refuses tokens without an `act`).
  const workloadToken = clientCredentialsToken({
    issuer: config.issuer,
    clientId: config.CLIENT_ID,
    clientSecret: config.CLIENT_SECRET,
    resource: config.downstreamResource,
  });
  const keys = credentialKeysFromEnv(env);
  const credentialDeps = {
    pool,
    cipher: createCredentialCipher(keys.keys, keys.current),
    exchanger: createTokenExchanger({
      issuer: config.issuer,
      clientId: config.CLIENT_ID,
      clientSecret: config.CLIENT_SECRET,
      style: config.EXCHANGE_STYLE,
    }),
    actorToken: workloadToken,
    downstreamResource: config.downstreamResource,
    ttlSeconds: config.DOWNSTREAM_TOKEN_TTL_SECONDS,
    workerId: config.workerId,
  };
  const tools = demoTools(config.TOOL_LIMITS);
  const loop = createWorkerLoop({
    boss,
    events,
    concurrency: config.WORKER_CONCURRENCY,
    pollMs: config.WORKER_POLL_MS,
    logger,
    run: {
      pool,
      tools,
      workerId: config.workerId,
      leaseMs: config.WORKER_LEASE_MS,
      stepMs: config.DEMO_STEP_MS,
      maxAttempts: config.WORKER_MAX_ATTEMPTS,
      logger,
      downstreamFor: (task) => {
        const credentials = createTaskCredentials(credentialDeps, task, tools.get(task.tool)?.scope ?? '');
        return {
          ...createDownstreamClient({ baseUrl: config.DOWNSTREAM_URL, taskId: task.id, token: credentials.token }),
          beginStage: credentials.beginStage,
        };
      },
    },
  });
  const maintenance = createMaintenance({ pool, boss, logger, tickMs: 1000, purgeEveryMs: 60_000 });

  return {
    running: loop.running,
    async start() {
      await loop.start();
      maintenance.start();
    },
    async stop() {
      maintenance.stop();
      await loop.stop(config.SHUTDOWN_GRACE_MS);
      await events.close();
      await boss.stop({ graceful: false, close: false }).catch(() => {});
      await pool.end();
    },
  };
}
