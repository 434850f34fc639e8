import { systemClock, type Clock } from '@mtg/clock';
import { createRequire } from 'node:module';
import path from 'node:path';
import express, { type NextFunction, type Request, type Response } from 'express';
import { createRemoteJWKSet, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import type { Pool } from '@mtg/db';
import { createCredentialCipher } from '@mtg/identity';
import type { Logger } from '@mtg/log';
import { revocationOf } from '@mtg/tasks';
import { createGatewayActions } from './actions/gateway-actions.ts';
import { createOidcClient } from './auth/oidc-client.ts';
import { requireSession, type RevocationCheck } from './http/guards.ts';
import { securityHeaders } from './http/security-headers.ts';
import { createSessionStore } from './http/session-store.ts';
import { approvalRoutes } from './routes/approval-routes.ts';
import { auditRoutes } from './routes/audit-routes.ts';
import { authRoutes } from './routes/auth-routes.ts';
import { queueRoutes } from './routes/queue-routes.ts';
import { taskRoutes } from './routes/task-routes.ts';

export interface ConsoleOptions {
  /** A pool whose sessions run as mtg_console (the audit views, its sessions, the queues). */
  pool: Pool;
  /**
   * Where the pages' queries (audit views, queues) go instead: a pool preferring the read
   * replica (DATABASE_READ_URL). Sessions, and readiness, stay on `pool`. Unset: `pool`.
   */
  readPool?: Pool;
  /** AES-256-GCM keys of the sessions at rest (CONSOLE_SESSION_KEY[S]); `current` seals. */
  sessionKeys: { keys: Record<string, Buffer>; current: string };
  /** Idle timeout of a session (default 30 minutes). */
  sessionIdleSeconds?: number;
  logger: Logger;
  /** Where browsers reach the console: the redirect URI is `<baseUrl>/auth/callback`. */
  baseUrl: string;
  issuer: string;
  clientId: string;
  clientSecret?: string;
  /** The gateway's MCP endpoint: the tokens' audience and where actions go. */
  gatewayResource: string;
  /** What an approver login asks for (CONSOLE_APPROVAL_SCOPES); none: no approver login. */
  approvalScopes?: readonly string[];
  /** The checkpoint signing keys' public JWKS, read when a page needs it. */
  checkpointKeys: () => Promise<JSONWebKeySet | undefined>;
  /** The IdP's token keys; default: its jwks_uri from discovery. */
  tokenKeys?: JWTVerifyGetKey;
  /** Prometheus endpoints for the queues page; default: the gateway's `/metrics`. */
  metricsEndpoints?: Array<{ name: string; url: string }>;
  /** Bearer token of those endpoints (METRICS_TOKEN), when they require one. */
  metricsToken?: string;
  now?: Clock;
  fetch?: typeof fetch;
}

const STATIC_DIR = path.join(import.meta.dirname, 'static');
/** The chart library's browser build, served as a file of its own (the CSP allows no other origin). */
function chartJsFile(): string {
  // The package exports no subpath for its UMD build; it sits next to the main entry.
  const main = createRequire(import.meta.url).resolve('chart.js');
  return path.join(path.dirname(main), 'chart.umd.min.js');
}

/** The console's Express app: login, sessions, CSRF and CSP, the pages and the actions. */
export function createConsole(options: ConsoleOptions) {
  const { pool, logger } = options;
  const reads = options.readPool ?? pool;
  const now = options.now ?? systemClock;
  const oidc = createOidcClient({
    issuer: options.issuer,
    clientId: options.clientId,
    ...(options.clientSecret ? { clientSecret: options.clientSecret } : {}),
    redirectUri: new URL('/auth/callback', options.baseUrl).href,
    resource: options.gatewayResource,
  });
  let remoteKeys: JWTVerifyGetKey | undefined;
  const tokenKeys: JWTVerifyGetKey =
    options.tokenKeys ??
    (async (header, token) => {
      remoteKeys ??= createRemoteJWKSet(new URL(await oidc.jwksUri()));
      return remoteKeys(header, token);
    });
  const sessions = createSessionStore({
    pool,
    cipher: createCredentialCipher(options.sessionKeys.keys, options.sessionKeys.current),
    ...(options.sessionIdleSeconds ? { idleSeconds: options.sessionIdleSeconds } : {}),
    clock: now,
  });
  // On the primary, never the replica: a revocation counts from the moment it is written.
  const revoked: RevocationCheck = (p) =>
    revocationOf(pool, {
      tenant: p.tenant,
      subject: p.subject,
      ...(p.issuedAt !== undefined ? { issuedAt: p.issuedAt } : {}),
    });
  const actions = createGatewayActions({
    mcpUrl: options.gatewayResource,
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });

  const chartJs = chartJsFile();
  const app = express();
  app.disable('x-powered-by');
  app.use(securityHeaders);
  app.get('/static/chart.umd.min.js', (_req, res) => res.sendFile(chartJs));
  app.use('/static', express.static(STATIC_DIR, { index: false, fallthrough: false }));
  app.get('/healthz', (_req, res) => res.json({ ok: true }));
  // Ready when it can reach its sessions: without them nobody can log in or stay logged in.
  app.get('/readyz', async (_req, res) => {
    try {
      await pool.query('SELECT 1 FROM app.console_sessions LIMIT 1');
      res.json({ ok: true });
    } catch (error) {
      logger.warn('not ready', { error: (error as Error).message });
      res.status(503).json({ ok: false, reason: 'database' });
    }
  });
  app.use(
    authRoutes({
      oidc,
      sessions,
      keys: tokenKeys,
      issuer: options.issuer,
      audience: options.gatewayResource,
      approvalScopes: options.approvalScopes ?? [],
      baseUrl: options.baseUrl,
      revoked,
      clock: now,
      logger,
    }),
  );
  app.use(requireSession(sessions, revoked, logger));
  app.get('/', (_req, res) => res.redirect(303, '/tasks'));
  app.use(taskRoutes({ pool: reads, logger, actions, keys: options.checkpointKeys, sessions }));
  app.use(approvalRoutes({ logger, actions, sessions }));
  app.use(
    auditRoutes({ pool: reads, logger, actions, keys: options.checkpointKeys, now, sessions }),
  );
  app.use(
    queueRoutes({
      pool: reads,
      logger,
      endpoints: options.metricsEndpoints ?? [
        { name: 'gateway', url: new URL('/metrics', options.gatewayResource).href },
      ],
      ...(options.metricsToken ? { token: options.metricsToken } : {}),
      ...(options.fetch ? { fetch: options.fetch } : {}),
    }),
  );
  app.use((_req: Request, res: Response) => res.status(404).type('text').send('not found'));
  // A failure of ours (the database away) is a plain 500 page; its text stays in the log.
  app.use(
    (error: Error & { status?: number }, req: Request, res: Response, _next: NextFunction) => {
      if (error.status && error.status < 500) {
        res
          .status(error.status)
          .type('text')
          .send(error.status === 413 ? 'request too large' : 'bad request');
        return;
      }
      logger.error('console request failed', { path: req.path, error: error.message });
      res.status(500).type('text').send('The console could not answer (see its log).');
    },
  );
  return { app, sessions };
}
