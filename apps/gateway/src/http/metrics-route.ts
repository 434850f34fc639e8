import { Router, type NextFunction, type Request, type Response } from 'express';
import { scrapeAllowed, type GatewayMetrics, type Registry } from '@mtg/metrics';

/**
 * GET /metrics (Prometheus text format). With METRICS_TOKEN set, a scraper presents it as a
 * bearer token; without it, only loopback callers are answered (docs/operations-resilience.md).
 */
export function metricsRoute(options: { registry: Registry; token?: string }): Router {
  const router = Router();
  router.get('/metrics', async (req, res) => {
    const allowed = scrapeAllowed(
      { authorization: req.headers.authorization, remoteAddress: req.socket.remoteAddress },
      options.token,
    );
    if (!allowed) {
      if (options.token) res.set('WWW-Authenticate', 'Bearer realm="metrics"');
      res
        .status(options.token ? 401 : 403)
        .json({ error: options.token ? 'invalid_token' : 'forbidden' });
      return;
    }
    res.set('Content-Type', options.registry.contentType).send(await options.registry.metrics());
  });
  return router;
}

const RPC_METHODS = new Set([
  'initialize',
  'notifications/initialized',
  'ping',
  'server/discover',
  'tools/list',
  'tools/call',
  'tasks/get',
  'tasks/result',
  'tasks/cancel',
  'tasks/list',
]);

/**
 * Times every request into mtg_http_request_duration_seconds, labelled with the route that
 * matched (its pattern, never the raw path), the JSON-RPC method on /mcp, and the status.
 */
export function recordRequestDurations(metrics: GatewayMetrics) {
  return (req: Request, res: Response, next: NextFunction) => {
    const end = metrics.httpDuration.startTimer();
    res.on('finish', () => {
      const route = req.route
        ? `${req.baseUrl}${String((req.route as { path: unknown }).path)}`
        : 'unmatched';
      end({ route, rpc: rpcLabel(req.body), status: String(res.statusCode) });
    });
    next();
  };
}

function rpcLabel(body: unknown): string {
  if (Array.isArray(body)) return 'batch';
  const method = (body as { method?: unknown } | undefined)?.method;
  if (typeof method !== 'string') return 'none';
  return RPC_METHODS.has(method) ? method : 'other';
}
