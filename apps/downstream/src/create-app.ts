import { nowMs } from '@mtg/clock';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import type { JWTVerifyGetKey } from 'jose';
import type { Pool } from '@mtg/db';
import type { Logger } from '@mtg/log';
import { apiRoutes, writesRoute } from './api/api-routes.ts';
import type { Faults } from './api/faults.ts';

export interface DownstreamDeps {
  pool: Pool;
  logger: Logger;
  /** How API callers' tokens are verified. */
  auth: { keys: JWTVerifyGetKey; issuer: string; audience: string };
  now?: () => number;
  /** Fault injection on /api (DOWNSTREAM_FAULTS=enabled only); see api/faults.ts. */
  faults?: Faults;
}

/**
 * The demo downstream resource server: its API under /api (token-checked writes and reads),
 * GET /_writes for tests and demos, liveness and readiness.
 */
export function createApp(deps: DownstreamDeps): Express {
  const now = deps.now ?? nowMs;
  const app = express();
  app.disable('x-powered-by');
  app.use(logRequests(deps.logger, now));

  app.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });

  app.get('/readyz', async (_req, res) => {
    try {
      await deps.pool.query('SELECT 1');
      res.json({ ok: true });
    } catch (error) {
      deps.logger.warn('readiness check failed', { error });
      res.status(503).json({ ok: false, error: 'database_unreachable' });
    }
  });

  app.use(writesRoute(deps.pool));
  if (deps.faults) {
    app.use(deps.faults.routes);
    app.use('/api', deps.faults.middleware);
  }
  app.use('/api', apiRoutes({ pool: deps.pool, logger: deps.logger, ...deps.auth }));

  app.use((_req, res) => {
    res.status(404).json({ error: 'not_found' });
  });
  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    const status = httpStatusOf(error);
    if (status >= 500) deps.logger.error('request failed', { error });
    res.status(status).json({ error: status >= 500 ? 'internal_error' : 'bad_request' });
  });
  return app;
}

/** One JSON line per request, written when the response has been sent. */
function logRequests(logger: Logger, now: () => number) {
  return (req: Request, res: Response, next: NextFunction) => {
    const started = now();
    res.on('finish', () => {
      logger.info('request', {
        method: req.method,
        path: req.path,
        status: res.statusCode,
        ms: now() - started,
      });
    });
    next();
  };
}

/** Body-parser errors carry a 4xx status; anything else is ours. */
function httpStatusOf(error: unknown): number {
  const status = (error as { status?: unknown } | null)?.status;
  return typeof status === 'number' && status >= 400 && status < 600 ? status : 500;
}
