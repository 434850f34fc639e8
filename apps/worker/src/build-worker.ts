import { createPool } from '@mtg/db';
import {
  clientCredentialsToken,
  createCredentialCipher,
  createTokenExchanger,
} from '@mtg/identity';
import type { Logger } from '@mtg/log';
import {
  createRegistry,
  createWorkerMetrics,
  registerClusterGauges,
  serveMetrics,
  CIRCUIT_STATE_VALUE,
  type MetricsServer,
} from '@mtg/metrics';
import {
  createMaintenance,
  createTaskCredentials,
  createWorkerLoop,
  type RunResult,
} from '@mtg/runner';
import { CHANNELS, createBoss, createTaskEvents, JOB_QUEUE } from '@mtg/tasks';
import { createDownstreamClient, createDownstreamResilience, demoTools } from '@mtg/tools';
import type { WorkerConfig } from './worker-config.ts';

export interface Worker {
  start(): Promise<void>;
  /** Graceful: running tasks stop at their next boundary and are released for others. */
  stop(): Promise<void>;
  running(): number;
  /** Its Prometheus endpoint once started, when WORKER_METRICS_PORT is set. */
  metricsUrl(): string | undefined;
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
  // The worker's own (workload) token: only ever the actor_token of an exchange, never a
  // credential for user work (the downstream refuses tokens without an `act`).
  const workloadToken = clientCredentialsToken({
    issuer: config.issuer,
    clientId: config.CLIENT_ID,
    clientSecret: config.CLIENT_SECRET,
    resource: config.downstreamResource,
  });
  const keys = config.credentialKeys;
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
  // One set of circuits per process: every task of this worker sees the same downstream health.
  const resilience = createDownstreamResilience({
    attemptTimeoutMs: config.DOWNSTREAM_ATTEMPT_TIMEOUT_MS,
    retries: config.DOWNSTREAM_RETRIES,
    backoffInitialMs: config.DOWNSTREAM_BACKOFF_INITIAL_MS,
    backoffMaxMs: config.DOWNSTREAM_BACKOFF_MAX_MS,
    breakerThreshold: config.DOWNSTREAM_BREAKER_THRESHOLD,
    breakerCooldownMs: config.DOWNSTREAM_BREAKER_COOLDOWN_MS,
  });
  resilience.onStateChange((downstream, state) => {
    logger.warn('downstream circuit changed', { downstream, state });
  });
  const observe =
    config.WORKER_METRICS_PORT > 0
      ? workerObservability(pool, boss, resilience, config.workerId)
      : undefined;
  const loop = createWorkerLoop({
    boss,
    events,
    concurrency: config.WORKER_CONCURRENCY,
    pollMs: config.WORKER_POLL_MS,
    logger,
    ...(observe ? { onRunEnded: observe.runEnded } : {}),
    run: {
      pool,
      tools,
      workerId: config.workerId,
      leaseMs: config.WORKER_LEASE_MS,
      stepMs: config.DEMO_STEP_MS,
      maxAttempts: config.WORKER_MAX_ATTEMPTS,
      logger,
      ...(observe ? { onTaskEnded: observe.taskEnded } : {}),
      downstreamFor: (task) => {
        const credentials = createTaskCredentials(
          credentialDeps,
          task,
          tools.get(task.tool)?.scope ?? '',
        );
        return {
          ...createDownstreamClient({
            baseUrl: config.DOWNSTREAM_URL,
            taskId: task.id,
            token: credentials.token,
            resilience,
          }),
          beginStage: credentials.beginStage,
        };
      },
    },
  });
  const maintenance = createMaintenance({
    pool,
    boss,
    logger,
    tickMs: 1000,
    purgeEveryMs: 60_000,
    ...(observe ? { onTaskEnded: observe.taskEnded } : {}),
  });
  let metricsServer: MetricsServer | undefined;
  let metricsUrl: string | undefined;

  return {
    running: loop.running,
    metricsUrl: () => metricsUrl,
    async start() {
      if (observe) {
        metricsServer = await serveMetrics({
          registry: observe.registry,
          port: config.WORKER_METRICS_PORT,
          host: config.WORKER_METRICS_HOST,
          ...(config.METRICS_TOKEN ? { token: config.METRICS_TOKEN } : {}),
        });
        metricsUrl = `http://${config.WORKER_METRICS_HOST}:${metricsServer.port}/metrics`;
        logger.info('metrics endpoint listening', { url: metricsUrl });
      }
      await loop.start();
      maintenance.start();
    },
    async stop() {
      maintenance.stop();
      await metricsServer?.close();
      await loop.stop(config.SHUTDOWN_GRACE_MS);
      await events.close();
      await boss.stop({ graceful: false, close: false }).catch(() => {});
      await pool.end();
    },
  };
}

/**
 * The worker's Prometheus metrics: runs, the duration and pickup latency of each task this
 * worker ended (its runs, or its deadline sweep), circuit states, and the cluster-wide task
 * and queue gauges.
 */
function workerObservability(
  pool: ReturnType<typeof createPool>,
  boss: ReturnType<typeof createBoss>,
  resilience: ReturnType<typeof createDownstreamResilience>,
  workerId: string,
) {
  const registry = createRegistry('worker', { worker: workerId });
  const metrics = createWorkerMetrics(registry);
  registerClusterGauges(registry, {
    db: pool,
    queueDepth: async () => {
      const q = await boss.getQueue(JOB_QUEUE);
      return { queued: q?.queuedCount ?? 0, active: q?.activeCount ?? 0 };
    },
  });
  resilience.onStateChange((downstream, state) => {
    metrics.circuitState.set({ downstream }, CIRCUIT_STATE_VALUE[state]);
    metrics.circuitTransitions.inc({ downstream, state });
  });
  // A run's result says how it ended, not whether this worker ended the task (another
  // process may have first): durations come from where the settlement commits, taskEnded.
  const runEnded = (_taskId: string, result: RunResult) => metrics.runs.inc({ result });
  return { registry, runEnded, taskEnded: metrics.taskEnded };
}
