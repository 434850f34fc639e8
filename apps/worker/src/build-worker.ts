import { createPool } from '@mtg/db';
import { clientCredentialsToken } from '@mtg/identity';
import type { Logger } from '@mtg/log';
import { createMaintenance, createWorkerLoop } from '@mtg/runner';
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
export async function buildWorker(config: WorkerConfig, logger: Logger): Promise<Worker> {
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
  // Until per-user delegation exists, the worker calls downstream as itself (its own
  // client-credentials token); the seam is downstreamFor().
  const workloadToken = clientCredentialsToken({
    issuer: config.issuer,
    clientId: config.CLIENT_ID,
    clientSecret: config.CLIENT_SECRET,
    resource: config.downstreamResource,
    scope: 'env:provision reports:run records:write',
  });
  const loop = createWorkerLoop({
    boss,
    events,
    concurrency: config.WORKER_CONCURRENCY,
    pollMs: config.WORKER_POLL_MS,
    logger,
    run: {
      pool,
      tools: demoTools(config.TOOL_LIMITS),
      workerId: config.workerId,
      leaseMs: config.WORKER_LEASE_MS,
      stepMs: config.DEMO_STEP_MS,
      maxAttempts: config.WORKER_MAX_ATTEMPTS,
      logger,
      downstreamFor: (task) =>
        createDownstreamClient({
          baseUrl: config.DOWNSTREAM_URL,
          taskId: task.id,
          token: workloadToken,
        }),
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
