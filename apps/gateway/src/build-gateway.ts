import { nowMs, type Clock } from '@mtg/clock';
import type https from 'node:https';
import { hostname } from 'node:os';
import {
  checkApplicationLogin,
  createPool,
  createReadRouter,
  databaseFailureOf,
  type Pool,
} from '@mtg/db';
import {
  createCredentialCipher,
  createTokenExchanger,
  discoverJwksUriPatiently,
  trustIssuer,
} from '@mtg/identity';
import type { Logger } from '@mtg/log';
import { loadPolicyFile } from '@mtg/policy';
import { declareStatusReadPolicy, observeAuditAppends } from '@mtg/audit';
import { withTaskSpans } from './mcp/trace-task-service.ts';
import {
  createAuditAppendMetrics,
  createExchangeMetrics,
  createGatewayMetrics,
  createReadRouteMetrics,
  createRegistry,
  instrumentExchanger,
  registerAuditGauges,
  registerClusterGauges,
  registerPoolGauges,
  registerUpstreamCallMetrics,
  registerUpstreamRefusalMetrics,
  registerQueueDepthGauges,
} from '@mtg/metrics';
import {
  CHANNELS,
  countUnservedTasks,
  createBoss,
  createJobQueue,
  createTaskEvents,
  createTaskService,
  createWorkerDirectory,
  missingQueues,
} from '@mtg/tasks';
import {
  createCatalogue,
  loadToolRegistry,
  RegistryError,
  serveInstantTool,
  whoami,
  type ToolRegistry,
} from '@mtg/tools';
import type { Express } from 'express';
import type { GatewayConfig } from './config.ts';
import { createApp } from './create-app.ts';

import { createRateLimits } from './http/rate-limit.ts';
import { takePrefetchedTask } from './http/prefetched-task.ts';
import { approvalTools } from './mcp/approval-tools.ts';
import { jobTools } from './mcp/job-tools.ts';
import { guardTaskService, taskServiceGuards } from './mcp/task-service-guards.ts';
import { createToolPolicy } from './mcp/tool-policy.ts';
import { loadTls } from './tls.ts';
import { startGatewayUpstreams } from './upstreams.ts';
import { transmitterKeySource } from './ssf/transmitter-keys.ts';

/** The gateway's own scope (administration); every other scope comes from the registry. */
export const ADMIN_SCOPES = ['tasks:admin'];

export interface Gateway {
  app: Express;
  /** node:https options when GATEWAY_TLS_CERT/KEY are set; serve over plain HTTP otherwise. */
  tls?: https.ServerOptions;
  close(): Promise<void>;
}

/**
 * Wires one gateway replica from its config and the tool registry (loaded once at start from
 * TOOL_PACKS; loaded here when not given): database, queue, keys, tools, service, app.
 */
export async function buildGateway(
  config: GatewayConfig,
  logger: Logger,
  /**
   * `registry`: the tool registry loaded once at start (loaded here from TOOL_PACKS when not
   * given); `clock`: the gateway's time (default: the system's), for tests that move it.
   */
  deps: { registry?: ToolRegistry; clock?: Clock } = {},
): Promise<Gateway> {
  const now = deps.clock ? { now: () => deps.clock!().getTime() } : {};
  const tools =
    deps.registry ??
    (await loadToolRegistry({
      packs: config.TOOL_PACKS,
      env: process.env,
      limits: config.TOOL_LIMITS,
    }));
  // Files first: a bad policy or certificate stops the gateway before it connects anywhere.
  // (jobTools only builds definitions here; the task service is not touched for names.)
  const ownTools = [whoami, ...jobTools(null as never), ...approvalTools(null as never)];
  // Upstream MCP servers (UPSTREAMS_FILE): listed now, so the policy can name their tools.
  const upstreams = await startGatewayUpstreams(
    config,
    logger,
    tools,
    ownTools.map((t) => t.name),
    () => nowMs(deps.clock),
  );
  const toolNames = [
    ...ownTools.map((t) => t.name),
    ...tools.names(),
    ...(upstreams?.names() ?? []),
  ];
  const policy = config.POLICY_FILE
    ? await loadPolicyFile(config.POLICY_FILE, { knownTools: toolNames })
    : undefined;
  if (policy) logger.info('tool policy loaded', { file: policy.source });
  const tls = await loadTls(config);

  const pool = createPool({
    connectionString: config.DATABASE_URL,
    role: config.DATABASE_ROLE,
    applicationName: 'gateway',
    max: config.DATABASE_POOL_MAX,
    genericPlans: true,
    queryTimeoutMs: config.DATABASE_QUERY_TIMEOUT_MS,
  });
  // Refuses a login that is not its role or could become the owner (packages/db).
  await checkApplicationLogin(pool, config.DATABASE_ROLE).catch(async (error: unknown) => {
    await pool.end();
    throw error;
  });
  const readPool = config.DATABASE_READ_URL
    ? await openReadReplica(config.DATABASE_READ_URL, config.DATABASE_ROLE, logger, {
        queryTimeoutMs: config.DATABASE_QUERY_TIMEOUT_MS,
        max: config.DATABASE_POOL_MAX,
      }).catch(async (error: unknown) => {
        await pool.end();
        throw error;
      })
    : undefined;
  const boss = createBoss(pool, { supervise: false });
  boss.on('error', (error: Error) => logger.warn('pg-boss error', { error: error.message }));
  await boss.start();
  const missing = await missingQueues(boss, [
    ...tools.queues().values(),
    ...(upstreams?.queues ?? []),
  ]);
  if (missing.length) {
    await boss.stop({ graceful: false, close: false }).catch(() => {});
    await pool.end();
    await upstreams?.close();
    throw new RegistryError(
      'unknown_tool',
      `queues ${missing.join(', ')} are not installed: run \`npm run migrate\` with the same TOOL_PACKS${upstreams ? ' and UPSTREAMS_FILE' : ''}`,
    );
  }
  // Endings are heard only while a verb waits for one (or, reading from a replica, always:
  // the task service then listens for its read-your-writes), so a gateway that waits for
  // nothing is not woken by every notification of the database (task-events.ts).
  const events = await createTaskEvents(
    config.DATABASE_URL,
    [],
    (error) => logger.warn('task events connection error', { error: error.message }),
    { onDemand: [CHANNELS.settled] },
  );

  const { keys, verify } = await trustIssuer(
    {
      issuer: config.issuer,
      jwksUri: config.AUTH_JWKS_URI,
      audience: config.resource,
      algorithms: config.AUTH_ALGORITHMS,
      clockToleranceSec: config.AUTH_CLOCK_TOLERANCE_SECONDS,
      requiredTyp: config.AUTH_REQUIRED_TYP,
      claims: config.claims,
      ...now,
    },
    logger,
  );
  const ssfIssuer = config.SSF_TRANSMITTER_ISSUER ?? config.issuer;
  const ssfKeys = await transmitterKeySource({
    transmitterIssuer: ssfIssuer,
    ...(config.SSF_JWKS_URI ? { jwksUri: config.SSF_JWKS_URI } : {}),
    authIssuer: config.issuer,
    authKeys: keys,
    discoverJwksUri: (issuer) => discoverJwksUriPatiently(issuer, logger),
    onError: (error) =>
      logger.warn('SSF transmitter jwks refresh failed', { error: error.message }),
  });

  const longTools = upstreams?.longTools ?? tools.long;
  const credentialKeys = config.credentialKeys;
  const delegation = {
    exchanger: createTokenExchanger({
      issuer: config.issuer,
      clientId: config.CLIENT_ID,
      clientSecret: config.CLIENT_SECRET,
      style: config.EXCHANGE_STYLE,
    }),
    cipher: createCredentialCipher(credentialKeys.keys, credentialKeys.current),
    workerResource: config.WORKER_RESOURCE,
    graceSeconds: config.DELEGATION_GRACE_SECONDS,
  };
  const registry = createRegistry('gateway');
  const gatewayMetrics = createGatewayMetrics(registry);
  // Read when scraped, or observed where the work happens: nothing on the request path waits.
  registerPoolGauges(registry, pool);
  registerAuditGauges(registry, { db: pool });
  if (upstreams) {
    registerUpstreamCallMetrics(registry, () => upstreams.guards);
    registerUpstreamRefusalMetrics(registry, () => upstreams.refusedCounts());
  }
  registerQueueDepthGauges(registry, {
    queues: tools.queues(),
    depth: (queue) =>
      boss
        .getQueue(queue)
        .then((q) => (q ? { queued: q.queuedCount, active: q.activeCount } : undefined)),
  });
  function routeReads(replica: Pool) {
    const readsTotal = createReadRouteMetrics(registry, () => router.state());
    const router = createReadRouter({
      primary: pool,
      replica,
      maxLagMs: config.DATABASE_READ_MAX_LAG_MS,
      onRead: (target, reason) => readsTotal.inc({ target, reason }),
      onReplicaState: (state, error) =>
        state === 'up'
          ? logger.info('read replica in use')
          : logger.warn('read replica unusable: reading from the primary', {
              error: error?.message,
            }),
    });
    return router;
  }
  // With a replica: polls, kept results and lists may read it; everything else stays on `pool`.
  const reads = readPool && routeReads(readPool);
  const appendSeconds = createAuditAppendMetrics(registry);
  observeAuditAppends(pool, (seconds) => appendSeconds.observe(seconds));
  delegation.exchanger = instrumentExchanger(delegation.exchanger, createExchangeMetrics(registry));
  const service = createTaskService({
    pool,
    ...(reads ? { reads } : {}),
    queue: createJobQueue(boss),
    events,
    tools: longTools,
    placement: (name) => {
      // An upstream's task-mode tool goes to its upstream's queue; a pack tool to its own.
      const upstream = tools.entry(name) ? undefined : upstreams?.placement(name);
      if (upstream) return { ...upstream, registryFingerprint: tools.fingerprint };
      return tools.placement(name);
    },
    workers: createWorkerDirectory(pool),
    delegation,
    limits: {
      maxActivePerUser: config.MAX_ACTIVE_TASKS_PER_USER,
      maxActivePerTenant: config.MAX_ACTIVE_TASKS_PER_TENANT,
      derivedDedupeWindowMs: config.DERIVED_DEDUPE_WINDOW_MS,
      pollIntervalMs: config.TASK_POLL_INTERVAL_MS,
    },
    statusReadAudit: config.STATUS_READ_AUDIT,
    // A poll's task row, read beside its revocation check (http/reject-revoked.ts) unless a
    // replica serves the polls (`prefetchPolledTask` below); none is there to take then.
    prefetched: takePrefetchedTask,
    cancelAckTimeoutMs: config.CANCEL_ACK_TIMEOUT_MS,
    onTaskEnded: (task) => gatewayMetrics.taskEnded(task),
    ...(deps.clock ? { clock: deps.clock } : {}),
    logger,
  });

  // In the trail, not only the config: an auditor reading it later learns how its status
  // reads were kept (docs/audit.md, "Status reads").
  await declareStatusReadPolicy(
    pool,
    config.STATUS_READ_AUDIT,
    `gateway@${hostname()}:${process.pid}`,
  );

  registerClusterGauges(registry, {
    db: pool,
    queueDepth: async () => {
      let queued = 0;
      let active = 0;
      for (const name of tools.queues().values()) {
        const q = await boss.getQueue(name);
        queued += q?.queuedCount ?? 0;
        active += q?.activeCount ?? 0;
      }
      return { queued, active };
    },
    unservedTasks: () => countUnservedTasks(pool),
  });
  const rateLimits = createRateLimits({
    pool,
    clock: deps.clock,
    settings: {
      startsPerMinute: config.RATE_LIMIT_STARTS_PER_MINUTE,
      clientStartsPerMinute: config.RATE_LIMIT_CLIENT_STARTS_PER_MINUTE,
      tenantStartsPerMinute: config.RATE_LIMIT_TENANT_STARTS_PER_MINUTE,
      pollsPerSecond: config.RATE_LIMIT_POLLS_PER_SECOND,
    },
  });
  // The policy, wired once: dispatch, the task-scope step-up and the task verbs ask this object.
  const toolPolicy = policy && createToolPolicy(policy, pool);
  // Every wire and the job tools reach the service through one list of guards: the tool
  // policy, denial counts, the database outage answer, the rate limits, the result-wait cap.
  const guarded = guardTaskService(
    service,
    taskServiceGuards({
      pool,
      logger,
      rateLimits,
      countDenial: (reason) => gatewayMetrics.denials.inc({ layer: 'task', reason }),
      maxResultWaitsPerCaller: config.TASK_RESULT_WAITS_PER_CALLER,
      ...(toolPolicy ? { toolPolicy } : {}),
    }),
  );
  // Each verb a span (tracing on), a task's poll linked to the trace that started it.
  const tasks = withTaskSpans(guarded, async (jobId) => {
    const r = await pool.query<{ traceparent: string | null }>(
      `SELECT data->>'traceparent' AS traceparent FROM pgboss.job WHERE id = $1`,
      [jobId],
    );
    return r.rows[0]?.traceparent ?? undefined;
  });

  const app = createApp({
    resource: config.resource,
    issuer: config.issuer,
    verify,
    tokenCacheMs: config.AUTH_TOKEN_CACHE_MS,
    admission: {
      serviceClients: config.serviceClients,
      delegatedTokens: config.AUTH_DELEGATED_TOKENS,
    },
    keysReady: () => keys.ready(),
    pool,
    catalogue: upstreams
      ? upstreams.serve([
          whoami,
          ...jobTools(tasks),
          ...approvalTools(tasks),
          ...tools.instant.map((t) => serveInstantTool(t, logger)),
        ])
      : createCatalogue([
          whoami,
          ...jobTools(tasks),
          ...approvalTools(tasks),
          ...tools.instant.map((t) => serveInstantTool(t, logger)),
        ]),
    longTools,
    tasks,
    rateLimits,
    prefetchPolledTask: !reads,
    metrics: {
      registry,
      gateway: gatewayMetrics,
      ...(config.METRICS_TOKEN ? { token: config.METRICS_TOKEN } : {}),
    },
    resultWaitMs: config.TASK_RESULT_WAIT_MS,
    clock: deps.clock,
    tasksGetFastPath: config.TASKS_GET_FAST_PATH === 'on',
    logger,
    allowedHosts: config.allowedHosts,
    allowedOrigins: config.allowedOrigins,
    maxBodyBytes: config.MAX_BODY_BYTES,
    scopesSupported: [
      ...new Set([...tools.scopes(), ...(upstreams?.scopes() ?? []), ...ADMIN_SCOPES]),
    ],
    ...(toolPolicy ? { toolPolicy } : {}),
    workloads: {
      trustedProxies: config.TRUSTED_PROXIES,
      forwardedCertHeader: config.FORWARDED_CERT_HEADER,
      clientCas: tls.clientCas,
    },
    ssf: {
      verify: {
        keys: ssfKeys.getKey,
        issuer: ssfIssuer,
        audience: config.resource,
        maxAgeSeconds: config.SSF_MAX_AGE_SECONDS,
        ...now,
      },
      ...(config.SSF_PUSH_AUTH ? { pushAuthorization: config.SSF_PUSH_AUTH } : {}),
      subjectIssuer: config.issuer,
    },
  });

  return {
    app,
    ...(tls.server ? { tls: tls.server } : {}),
    async close() {
      await upstreams?.close();
      keys.stop();
      ssfKeys.stop();
      await events.close();
      await boss.stop({ graceful: false, close: false }).catch(() => {});
      await reads?.close();
      await readPool?.end();
      await pool.end();
    },
  };
}

/**
 * The read replica's pool. Its login is checked as the primary's is (a superuser login there
 * is as dangerous as here); a replica that cannot be reached now is no reason not to start:
 * the reads go to the primary until it answers.
 */
async function openReadReplica(
  url: string,
  role: string,
  logger: Logger,
  pool: { queryTimeoutMs: number; max: number },
) {
  const readPool = createPool({
    connectionString: url,
    role,
    applicationName: 'gateway-read',
    ...pool,
  });
  try {
    await checkApplicationLogin(readPool, role);
  } catch (error) {
    if (!databaseFailureOf(error) || databaseFailureOf(error)?.code !== 'database_unavailable') {
      await readPool.end();
      throw error;
    }
    logger.warn('read replica not reachable at start: reading from the primary until it is', {
      error: (error as Error).message,
    });
  }
  return readPool;
}
