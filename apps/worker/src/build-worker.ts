import type { Clock } from '@mtg/clock';
import { createPool } from '@mtg/db';
import {
  clientCredentialsToken,
  createCredentialCipher,
  createTokenExchanger,
  httpFetch,
} from '@mtg/identity';
import type { Logger } from '@mtg/log';
import {
  createExchangeMetrics,
  createRegistry,
  createTargetCallMetrics,
  createWorkerMetrics,
  instrumentExchanger,
  instrumentFetch,
  registerClusterGauges,
  registerPoolGauges,
  registerQueueDepthGauges,
  registerSlotGauges,
  registerUpstreamCallMetrics,
  serveMetrics,
  CIRCUIT_STATE_VALUE,
  type MetricsServer,
} from '@mtg/metrics';
import {
  createMaintenance,
  createWorkerLoop,
  createWorkerPeers,
  type RunResult,
  type ServedTool,
} from '@mtg/runner';
import {
  announceWorker,
  CHANNELS,
  createBoss,
  createTaskEvents,
  missingQueues,
  retireWorker,
  wakeChannelOf,
} from '@mtg/tasks';
import {
  createDownstreamResilience,
  loadTargets,
  type DownstreamResilience,
  type ToolRegistry,
} from '@mtg/tools';
import { inSpan } from '@mtg/telemetry';
import { createTaskTargets } from './task-targets.ts';
import { serveHealth, type HealthServer } from './serve-health.ts';
import { createTaskUpstreams } from './task-upstreams.ts';
import { CATALOGUE_CHANNEL, loadUpstreams, type UpstreamGuard } from '@mtg/upstreams';
import { startWorkerUpstreams } from './worker-upstreams.ts';
import { WorkerSetupError } from './worker-setup-error.ts';
import type { WorkerConfig } from './worker-config.ts';

export interface Worker {
  start(): Promise<void>;
  /** Graceful: running tasks stop at their next boundary and are released for others. */
  stop(): Promise<void>;
  running(): number;
  /** Its Prometheus endpoint once started, when WORKER_METRICS_PORT is set. */
  metricsUrl(): string | undefined;
  /** Its probes (`/healthz`, `/readyz`) once started: always served (WORKER_HEALTH_PORT). */
  healthUrl(): string | undefined;
}

/**
 * Wires one worker process: the tools it serves (WORKER_TOOLS of the registry), their
 * targets, database, queues, notifications, credentials, loop. A tool name it does not know,
 * a target a pack needs that is not configured, or a queue that was never installed stops it
 * with a WorkerSetupError (exit 2) before it fetches anything.
 */
export async function buildWorker(
  config: WorkerConfig,
  registry: ToolRegistry,
  logger: Logger,
  /** `clock`: the worker's time (default: the system's), for tests that move it. */
  deps: { clock?: Clock } = {},
): Promise<Worker> {
  const served = servedTools(registry, config.WORKER_TOOLS);
  const targets = loadTargets({
    ...(config.TARGETS_FILE ? { file: config.TARGETS_FILE } : {}),
    downstreamUrl: config.DOWNSTREAM_URL,
    downstreamResource: config.downstreamResource,
  });
  const upstreamList = loadUpstreams(config.UPSTREAMS_FILE);
  for (const { tool } of served.values()) {
    for (const name of tool.origin?.targets ?? []) {
      if (!targets.has(name)) {
        throw new WorkerSetupError(
          `pack ${tool.origin?.pack} needs target ${name} (for ${tool.name}), which TARGETS_FILE does not define`,
        );
      }
    }
    for (const name of tool.origin?.upstreams ?? []) {
      if (!upstreamList.some((u) => u.name === name)) {
        throw new WorkerSetupError(
          `pack ${tool.origin?.pack} needs upstream ${name} (for ${tool.name}), which UPSTREAMS_FILE does not define`,
        );
      }
    }
  }
  const clock = deps.clock ? { clock: deps.clock } : {};
  const pool = createPool({
    connectionString: config.DATABASE_URL,
    role: config.DATABASE_ROLE,
    applicationName: config.workerId,
    max: config.DATABASE_POOL_MAX ?? Math.min(config.WORKER_CONCURRENCY + 5, 10),
    genericPlans: true,
  });
  // Upstream task tools (UPSTREAMS_FILE) join `served` from the stored catalogue.
  const upstreams = await startWorkerUpstreams(upstreamList, pool, served, logger);
  const queues = [
    ...new Set([
      ...[...served.keys()].flatMap((name) => registry.entry(name)?.queue ?? []),
      ...(upstreams?.queues ?? []),
    ]),
  ];
  // Supervised by the maintenance leader's calls, not by a timer in every worker.
  const boss = createBoss(pool, { supervise: false });
  boss.on('error', (error: Error) => logger.warn('pg-boss error', { error: error.message }));
  await boss.start();
  const missing = await missingQueues(boss, queues);
  if (missing.length) {
    await boss.stop({ graceful: false, close: false }).catch(() => {});
    await pool.end();
    throw new WorkerSetupError(
      `queues ${missing.join(', ')} are not installed: run \`npm run migrate\` with the same TOOL_PACKS`,
    );
  }
  // The tasks a gateway chose this worker for come on its own channel (worker-directory.ts).
  const wakeChannel = wakeChannelOf(config.workerId);
  const events = await createTaskEvents(
    config.DATABASE_URL,
    [wakeChannel, CHANNELS.created, CHANNELS.control, ...(upstreams ? [CATALOGUE_CHANNEL] : [])],
    (error) => logger.warn('task events connection error', { error: error.message }),
  );
  upstreams?.listen(events);
  // The worker's own (workload) token: only ever the actor_token of an exchange, never a
  // credential for user work (the downstream refuses tokens without an `act`).
  const workloadToken = clientCredentialsToken({
    issuer: config.issuer,
    clientId: config.CLIENT_ID,
    clientSecret: config.CLIENT_SECRET,
    resource: config.downstreamResource,
    clock: deps.clock,
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
      ...(deps.clock ? { now: () => deps.clock!().getTime() } : {}),
    }),
    actorToken: workloadToken,
    ttlSeconds: config.DOWNSTREAM_TOKEN_TTL_SECONDS,
    stageReuseMs: config.STAGE_TOKEN_REUSE_SECONDS * 1000,
    workerId: config.workerId,
    ...clock,
  };
  // One set of circuits per target and process: every task of this worker sees the same
  // downstream health; each target has its own timeouts and retries.
  const resilience = new Map<string, DownstreamResilience>();
  for (const t of targets.values()) {
    const r = createDownstreamResilience({
      attemptTimeoutMs: t.attemptTimeoutMs ?? config.DOWNSTREAM_ATTEMPT_TIMEOUT_MS,
      retries: t.retries ?? config.DOWNSTREAM_RETRIES,
      backoffInitialMs: t.backoffInitialMs ?? config.DOWNSTREAM_BACKOFF_INITIAL_MS,
      backoffMaxMs: t.backoffMaxMs ?? config.DOWNSTREAM_BACKOFF_MAX_MS,
      breakerThreshold: t.breakerThreshold ?? config.DOWNSTREAM_BREAKER_THRESHOLD,
      breakerCooldownMs: t.breakerCooldownMs ?? config.DOWNSTREAM_BREAKER_COOLDOWN_MS,
    });
    r.onStateChange((downstream, state) => {
      logger.warn('downstream circuit changed', { target: t.name, downstream, state });
    });
    resilience.set(t.name, r);
  }
  const observe =
    config.WORKER_METRICS_PORT > 0
      ? workerObservability(pool, boss, [...resilience.values()], config.workerId, queues, {
          // An upstream task tool is no registry entry: its queue is its upstream's.
          served: new Map(
            [...served.keys()].flatMap((name) => {
              const queue = registry.entry(name)?.queue ?? upstreams?.queueOf(name);
              return queue ? [[name, queue] as const] : [];
            }),
          ),
          slots: { busy: () => loop.running(), total: config.WORKER_CONCURRENCY },
          ...(upstreams ? { upstreamGuards: upstreams.guards } : {}),
        })
      : undefined;
  if (observe)
    credentialDeps.exchanger = instrumentExchanger(credentialDeps.exchanger, observe.exchanges);
  // Each exchange a span of the task's trace (a no-op span when tracing is off).
  const exchanger = credentialDeps.exchanger;
  credentialDeps.exchanger = {
    ...exchanger,
    exchange: (request) => inSpan('token.exchange', {}, () => exchanger.exchange(request)),
  };
  const peers = createWorkerPeers({ self: config.workerId, pool });
  // The announcement answers the live workers too: one statement every 5 s.
  const announce = async () => {
    peers.know(
      await announceWorker(pool, {
        id: config.workerId,
        queues,
        registryFingerprint: registry.fingerprint,
        wakeChannel,
      }),
    );
  };
  const loop = createWorkerLoop({
    boss,
    events,
    queues,
    concurrency: config.WORKER_CONCURRENCY,
    pollMs: config.WORKER_POLL_MS,
    logger,
    peers,
    workerId: config.workerId,
    wakeChannel,
    forward: async (payload) => {
      await pool.query('SELECT pg_notify($1, $2)', [CHANNELS.created, JSON.stringify(payload)]);
    },
    ...(observe ? { onRunEnded: observe.runEnded } : {}),
    run: {
      pool,
      tools: served,
      workerId: config.workerId,
      leaseMs: config.WORKER_LEASE_MS,
      maxAttempts: config.WORKER_MAX_ATTEMPTS,
      logger,
      ...clock,
      ...(observe ? { onTaskEnded: observe.taskEnded } : {}),
      targetsFor: createTaskTargets({
        credentials: credentialDeps,
        targets,
        resilience,
        ...(observe ? { fetchFor: observe.fetchFor } : {}),
      }),
      ...(upstreams
        ? {
            upstreamsFor: createTaskUpstreams({
              pool,
              credentials: credentialDeps,
              upstreams: upstreams.configs,
              guards: upstreams.guards,
              workerId: config.workerId,
            }),
          }
        : {}),
    },
  });
  const maintenance = createMaintenance({
    pool,
    boss,
    logger,
    tickMs: 1000,
    purgeEveryMs: 60_000,
    ...clock,
    ...(observe ? { onTaskEnded: observe.taskEnded } : {}),
  });
  let metricsServer: MetricsServer | undefined;
  let metricsUrl: string | undefined;
  let announcer: NodeJS.Timeout | undefined;
  let health: HealthServer | undefined;
  let healthUrl: string | undefined;
  let subscribed = false;
  let draining = false;

  return {
    running: loop.running,
    metricsUrl: () => metricsUrl,
    healthUrl: () => healthUrl,
    async start() {
      // First, so a probe can tell "starting" (503) from "gone" (no answer).
      health = await serveHealth({
        port: config.WORKER_HEALTH_PORT,
        host: config.WORKER_HEALTH_HOST,
        checks: {
          database: async () => {
            await pool.query('SELECT 1');
            return true;
          },
          subscribed: () => subscribed,
          draining: () => draining,
        },
      });
      healthUrl = `http://${config.WORKER_HEALTH_HOST}:${health.port}`;
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
      await announce();
      announcer = setInterval(() => {
        announce().catch((error: Error) =>
          logger.warn('worker announcement failed', { error: error.message }),
        );
      }, 5000);
      announcer.unref();
      await loop.start();
      subscribed = true;
      maintenance.start();
      logger.info('serving', { tools: [...served.keys()], queues });
    },
    async stop() {
      draining = true;
      clearInterval(announcer);
      upstreams?.stop();
      maintenance.stop();
      await metricsServer?.close();
      await loop.stop(config.SHUTDOWN_GRACE_MS);
      subscribed = false;
      await retireWorker(pool, config.workerId).catch(() => {});
      await events.close();
      await boss.stop({ graceful: false, close: false }).catch(() => {});
      await pool.end();
      await health?.close();
    },
  };
}

/** WORKER_TOOLS, checked against the registry: each a long tool it loaded. */
export function servedTools(
  registry: ToolRegistry,
  names: string[] | undefined,
): Map<string, ServedTool> {
  const chosen = names ?? [...registry.long.keys()];
  const served = new Map<string, ServedTool>();
  for (const name of chosen) {
    const tool = registry.long.get(name);
    if (!tool) {
      throw new WorkerSetupError(
        `WORKER_TOOLS names ${name}, which is not a long tool of TOOL_PACKS (long tools: ${[...registry.long.keys()].join(', ') || 'none'})`,
      );
    }
    served.set(name, { tool, fingerprint: registry.entry(name)!.fingerprint });
  }
  if (!served.size) throw new WorkerSetupError('WORKER_TOOLS leaves this worker nothing to run');
  return served;
}

/**
 * The worker's Prometheus metrics: runs, the duration and pickup latency of each task this
 * worker ended (its runs, or its deadline sweep), circuit states, and the cluster-wide task
 * and queue gauges.
 */
function workerObservability(
  pool: ReturnType<typeof createPool>,
  boss: ReturnType<typeof createBoss>,
  resilience: DownstreamResilience[],
  workerId: string,
  queues: string[],
  own: {
    served: ReadonlyMap<string, string>;
    slots: { busy: () => number; total: number };
    upstreamGuards?: ReadonlyMap<string, UpstreamGuard>;
  },
) {
  const registry = createRegistry('worker', { worker: workerId });
  const metrics = createWorkerMetrics(registry);
  registerPoolGauges(registry, pool);
  registerSlotGauges(registry, own.slots);
  const upstreamGuards = own.upstreamGuards;
  if (upstreamGuards) registerUpstreamCallMetrics(registry, () => upstreamGuards);
  registerQueueDepthGauges(registry, {
    queues: own.served,
    depth: (queue) =>
      boss
        .getQueue(queue)
        .then((q) => (q ? { queued: q.queuedCount, active: q.activeCount } : undefined)),
  });
  const exchanges = createExchangeMetrics(registry);
  const targetCalls = createTargetCallMetrics(registry);
  const fetchFor = (target: string) => instrumentFetch(httpFetch, targetCalls, target);
  registerClusterGauges(registry, {
    db: pool,
    queueDepth: async () => {
      let queued = 0;
      let active = 0;
      for (const name of queues) {
        const q = await boss.getQueue(name);
        queued += q?.queuedCount ?? 0;
        active += q?.activeCount ?? 0;
      }
      return { queued, active };
    },
  });
  for (const r of resilience) {
    r.onStateChange((downstream, state) => {
      metrics.circuitState.set({ downstream }, CIRCUIT_STATE_VALUE[state]);
      metrics.circuitTransitions.inc({ downstream, state });
    });
  }
  // A run's result says how it ended, not whether this worker ended the task (another
  // process may have first): durations come from where the settlement commits, taskEnded.
  const runEnded = (_taskId: string, result: RunResult) => metrics.runs.inc({ result });
  return { registry, runEnded, taskEnded: metrics.taskEnded.bind(metrics), exchanges, fetchFor };
}
