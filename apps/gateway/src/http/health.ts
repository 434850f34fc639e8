import { Router } from 'express';
import type { Pool } from '@mtg/db';

/**
 * How long readiness waits for the database: a probe that hangs is a probe a load balancer
 * times out on its own terms; not ready, said at once, drains the replica sooner.
 */
export const READINESS_DATABASE_TIMEOUT_MS = 2000;

/** Liveness (process up) and readiness (database reachable, signing keys loaded). */
export function healthRoutes(deps: { pool: Pool; keysReady: () => boolean }): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });
  router.get('/readyz', async (_req, res) => {
    const checks = { database: false, keys: deps.keysReady() };
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        deps.pool.query('SELECT 1'),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error('timeout')), READINESS_DATABASE_TIMEOUT_MS);
        }),
      ]);
      checks.database = true;
    } catch {
      checks.database = false;
    } finally {
      clearTimeout(timer);
    }
    const ok = checks.database && checks.keys;
    res.status(ok ? 200 : 503).json({ ok, checks });
  });
  return router;
}
