import { Router } from 'express';
import type { Pool } from '@mtg/db';

/** Liveness (process up) and readiness (database reachable, signing keys loaded). */
export function healthRoutes(deps: { pool: Pool; keysReady: () => boolean }): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });
  router.get('/readyz', async (_req, res) => {
    const checks = { database: false, keys: deps.keysReady() };
    try {
      await deps.pool.query('SELECT 1');
      checks.database = true;
    } catch {
      checks.database = false;
    }
    const ok = checks.database && checks.keys;
    res.status(ok ? 200 : 503).json({ ok, checks });
  });
  return router;
}
