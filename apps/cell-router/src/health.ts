import { Router } from 'express';
import type { Cell } from './cells-file.ts';

const CELL_PROBE_TIMEOUT_MS = 1000;

/**
 * Liveness, and readiness: the cells file loaded (the router does not start without it) and
 * the issuer's signing keys loaded (no token can be routed without them). Each cell's own
 * /readyz is reported, not required: one cell down must not take the router, and with it
 * every other cell's tenants, out of its load balancer.
 */
export function healthRoutes(deps: {
  cells: readonly Cell[];
  keysReady: () => boolean;
  fetch?: typeof fetch;
}): Router {
  const doFetch = deps.fetch ?? fetch;
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });
  router.get('/readyz', async (_req, res) => {
    const probes = await Promise.all(
      deps.cells.map(async (cell) => {
        try {
          const r = await doFetch(`${cell.url}/readyz`, {
            signal: AbortSignal.timeout(CELL_PROBE_TIMEOUT_MS),
          });
          await r.body?.cancel();
          return [cell.name, r.ok] as const;
        } catch {
          return [cell.name, false] as const;
        }
      }),
    );
    const checks = { cellsFile: true, keys: deps.keysReady() };
    const ok = checks.cellsFile && checks.keys;
    res.status(ok ? 200 : 503).json({ ok, checks, cells: Object.fromEntries(probes) });
  });
  return router;
}
