import type { Clock } from '@mtg/clock';
import type { X509Certificate } from 'node:crypto';
import express, { type NextFunction, type Request, type Response } from 'express';
import { appendAuditGrouped } from '@mtg/audit';
import { databaseFailureOf, type Pool } from '@mtg/db';
import type { VerifyOptions } from '@mtg/identity';
import { metadataUrlsFor } from '@mtg/identity';
import { clipEveryField, clipInput, type Logger } from '@mtg/log';
import type { TaskService } from '@mtg/tasks';
import type { Catalogue, LongToolDefinition } from '@mtg/tools';
import { authenticate } from './http/authenticate.ts';
import { recordClientOrigin } from './http/client-origin.ts';
import { traced, traceRequests } from './http/trace-request.ts';
import { correlateAndLog } from './http/correlation.ts';
import { correlationIdOf } from './http/request-meta.ts';
import { healthRoutes } from './http/health.ts';
import { RPC, sendRpcError, sendUnavailable } from './http/json-rpc-error.ts';
import { parseJsonRpc } from './http/parse-json-rpc.ts';
import { validateHost, validateOrigin, type OnGuardDenied } from './http/request-guards.ts';
import { requireToolScope } from './http/require-tool-scope.ts';
import { requireTaskScope, taskVerbOf } from './http/require-task-scope.ts';
import { createDenialAuditor } from './http/audit-denials.ts';
import { resourceMetadataRoutes } from './http/resource-metadata.ts';
import { adminRoutes } from './http/admin-routes.ts';
import { rejectRevoked } from './http/reject-revoked.ts';
import { isFastTaskStart } from './mcp/fast-task-start.ts';
import { isPollRequest } from './mcp/poll-request.ts';
import {
  refuseServicePrincipals,
  type PrincipalAdmission,
} from './http/refuse-service-principals.ts';
import {
  securityEventRoutes,
  type SecurityEventReceiverOptions,
} from './ssf/security-event-routes.ts';
import { workloadIdentity } from './http/workload-identity.ts';
import { requestContextOf } from './http/request-context.ts';
import { createDispatch } from './mcp/dispatch.ts';
import type { ToolPolicy } from './mcp/tool-policy.ts';
import { mcpEndpoint } from './mcp/mcp-endpoint.ts';
import type { GatewayMetrics, Registry } from '@mtg/metrics';
import { metricsRoute, recordRequestDurations } from './http/metrics-route.ts';
import type { RateLimits } from './http/rate-limit.ts';

export interface GatewayDeps {
  resource: string;
  issuer: string;
  verify: VerifyOptions;
  /** AUTH_TOKEN_CACHE_MS: how long a verified access token is remembered. */
  tokenCacheMs?: number;
  /** Verified principals still refused: the deployment's own services, delegated tokens. */
  admission: PrincipalAdmission;
  keysReady: () => boolean;
  pool: Pool;
  catalogue: Catalogue;
  longTools: ReadonlyMap<string, LongToolDefinition>;
  tasks: TaskService;
  /** How long a blocking tasks/result waits for the task to end. */
  resultWaitMs: number;
  /** The gateway's clock (default: the system's): how long a blocking tasks/result holds. */
  clock?: Clock;
  /** 2026 `tasks/get` answered without the SDK's per-request server (mcp/fast-tasks-get.ts). */
  tasksGetFastPath?: boolean;
  logger: Logger;
  allowedHosts: string[];
  allowedOrigins: string[];
  maxBodyBytes: number;
  scopesSupported: string[];
  /**
   * Per-tool policy from POLICY_FILE (the one object build-gateway.ts also hands the task
   * verbs' guard); undefined: every tool the token's scopes allow.
   */
  toolPolicy?: ToolPolicy;
  /** Where the caller's workload identity may come from (docs/identity.md). */
  workloads: {
    trustedProxies: string[];
    forwardedCertHeader: string;
    clientCas: X509Certificate[];
  };
  /** The Shared Signals push receiver (POST /ssf/events). */
  ssf: SecurityEventReceiverOptions;
  /** Start and poll limits (applied around `tasks`); on /mcp they also set Retry-After. */
  rateLimits?: RateLimits;
  /**
   * Whether a poll's task is read beside its revocation check on the primary (one round trip
   * per poll). Off with a read replica, whose polls read their task there.
   */
  prefetchPolledTask?: boolean;
  /** Prometheus: the registry GET /metrics serves, and the gateway's own series. */
  metrics?: { registry: Registry; gateway: GatewayMetrics; token?: string };
}

export function createApp(deps: GatewayDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  const resourceMetadataUrl = metadataUrlsFor(deps.resource)[0]!;
  const mcpPath = new URL(deps.resource).pathname;
  const countAuthDenial = (reason: string) =>
    deps.metrics?.gateway.denials.inc({ layer: 'auth', reason });
  const denials = createDenialAuditor({ pool: deps.pool, logger: deps.logger });
  const toolPolicy = deps.toolPolicy;
  // Tasks a revocation ends here, for the task duration histogram (the task service is
  // wired in build-gateway.ts for cancels).
  const onTaskEnded = deps.metrics
    ? { onTaskEnded: deps.metrics.gateway.taskEnded.bind(deps.metrics.gateway) }
    : {};
  // Host/Origin refusals and refused SETs name nobody verified: audited flood-safely too.
  const onGuardDenied: OnGuardDenied = (res, reason) => {
    const header = reason === 'host_not_allowed' ? 'host' : 'origin';
    deps.metrics?.gateway.denials.inc({ layer: 'http', reason });
    denials.anonymous(res, reason, {
      path: res.req.path,
      [header]: clipInput(String(res.req.headers[header] ?? '')),
    });
  };
  const onSetRefused = (res: Response, refusal: { code: string; description: string }) => {
    const reason = `set_${refusal.code}`;
    deps.metrics?.gateway.denials.inc({ layer: 'ssf', reason });
    denials.anonymous(res, reason, { path: res.req.path, description: refusal.description });
  };
  const onTokenDenied = (req: Request, code: string, res: Response) => {
    countAuthDenial(code);
    denials.unauthenticated(req, res, code);
  };
  const identifyWorkload = workloadIdentity({
    ...deps.workloads,
    now: deps.clock,
    resourceMetadataUrl,
    logger: deps.logger,
    onDenied: (res, reason) => {
      countAuthDenial(reason);
      const p = requestContextOf(res).principal;
      return appendAuditGrouped(deps.pool, {
        type: 'auth.denied',
        tenant: p.tenant,
        subject: p.subject,
        client: p.client,
        reason,
        correlationId: correlationIdOf(res),
      });
    },
  });

  // What every bearer-token route passes first: Origin, the token, who holds it, then
  // revocation (on the MCP route, once its body is parsed: see below).
  const tokenGates = [
    validateOrigin(deps.allowedOrigins, onGuardDenied),
    traced(
      'authenticate',
      authenticate({
        verify: deps.verify,
        ...(deps.tokenCacheMs !== undefined ? { tokenCacheMs: deps.tokenCacheMs } : {}),
        resourceMetadataUrl,
        logger: deps.logger,
        onDenied: onTokenDenied,
      }),
    ),
    refuseServicePrincipals({
      ...deps.admission,
      resourceMetadataUrl,
      logger: deps.logger,
      onDenied: (res, principal, code) => {
        countAuthDenial(code);
        denials.principal(res, principal, code);
      },
    }),
  ];
  const revocationGate = { pool: deps.pool, resourceMetadataUrl, logger: deps.logger };
  const bearerGates = [...tokenGates, rejectRevoked(revocationGate)];
  // The MCP route checks revocation after parsing, so that a poll's or a start's rate-limit
  // counts ride in the revocation check's statement (rejectRevoked, `counts`).
  const isLongTool = (name: string) => deps.longTools.has(name);
  const mcpRevocationGate = deps.rateLimits
    ? [
        deps.rateLimits.retryAfterHeader.bind(deps.rateLimits),
        rejectRevoked({
          ...revocationGate,
          counts: {
            limits: deps.rateLimits,
            isPoll: (req) => isPollRequest(req.body),
            taskOf: (req) =>
              deps.prefetchPolledTask === true ? taskVerbOf(req.body)?.taskId : undefined,
            isStart: (req) => deps.tasksGetFastPath !== false && isFastTaskStart(req, isLongTool),
          },
        }),
      ]
    : [rejectRevoked(revocationGate)];

  if (deps.metrics) app.use(recordRequestDurations(deps.metrics.gateway));
  app.use(traceRequests());
  app.use(recordClientOrigin(deps.workloads.trustedProxies));
  app.use(correlateAndLog(deps.logger));
  app.use(validateHost(deps.allowedHosts, onGuardDenied));
  app.use(healthRoutes({ pool: deps.pool, keysReady: deps.keysReady }));
  if (deps.metrics)
    app.use(
      metricsRoute({
        registry: deps.metrics.registry,
        ...(deps.metrics.token ? { token: deps.metrics.token } : {}),
      }),
    );
  app.use(
    resourceMetadataRoutes({
      resource: deps.resource,
      issuer: deps.issuer,
      scopes: deps.scopesSupported,
    }),
  );
  // The transmitter authenticates by its signature (and SSF_PUSH_AUTH), not a bearer token.
  app.use(
    securityEventRoutes({
      ...deps.ssf,
      pool: deps.pool,
      logger: deps.logger,
      ...onTaskEnded,
      onRefused: onSetRefused,
    }),
  );
  app.use(
    adminRoutes({
      pool: deps.pool,
      logger: deps.logger,
      ...onTaskEnded,
      resourceMetadataUrl,
      gates: bearerGates,
    }),
  );
  app.all(
    mcpPath,
    ...tokenGates,
    identifyWorkload,
    ...parseJsonRpc(deps.maxBodyBytes),
    ...mcpRevocationGate,
    requireToolScope(
      deps.catalogue,
      deps.longTools,
      resourceMetadataUrl,
      (_req, code, tool, res) => {
        countAuthDenial(code);
        denials.principal(res, requestContextOf(res).principal, code, tool);
      },
    ),
    requireTaskScope({
      pool: deps.pool,
      longTools: deps.longTools,
      ...(toolPolicy ? { toolPolicy } : {}),
      resourceMetadataUrl,
      onDenied: (reason) => deps.metrics?.gateway.denials.inc({ layer: 'task', reason }),
      onSummaryFailed: (error) =>
        deps.logger.warn('denial summary audit failed', { error: error.message }),
    }),
    mcpEndpoint(
      createDispatch(deps.catalogue, deps.longTools, deps.tasks, toolPolicy),
      // The SDKs' error messages quote the request's headers and body.
      clipEveryField(deps.logger),
      {
        resultWaitMs: deps.resultWaitMs,
        clock: deps.clock,
        ...(deps.tasksGetFastPath === false ? { tasksGetFastPath: false } : {}),
      },
    ),
  );

  app.use((_req: Request, res: Response) => {
    res.status(404).json({ error: 'not_found' });
  });
  // Last resort: a bug must not leak a stack trace or kill the process. A database outage
  // (e.g. the revocation check could not run) is not a bug: 503 + Retry-After.
  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const outage = databaseFailureOf(error)?.code === 'database_unavailable';
    deps.logger[outage ? 'warn' : 'error'](outage ? 'database unavailable' : 'unhandled', {
      correlationId: correlationIdOf(res),
      error: clipInput(error instanceof Error ? error.message : String(error)),
    });
    if (res.headersSent) return;
    if (outage) sendUnavailable(res);
    else sendRpcError(res, 500, RPC.internalError, 'Internal error');
  });
  return app;
}
