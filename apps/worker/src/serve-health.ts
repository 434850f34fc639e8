import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface HealthChecks {
  /** The database answers a trivial query within the probe's time. */
  database(): Promise<boolean>;
  /** The worker loop is started and fetching from its queues. */
  subscribed(): boolean;
  /** A graceful stop has begun: running tasks are being released. */
  draining(): boolean;
}

export interface HealthServer {
  port: number;
  close(): Promise<void>;
}

/**
 * The worker's probes, served whether or not metrics are on: `GET /healthz` (the process
 * answers; stays 200 while draining, so a liveness probe never kills a worker that is
 * handing its tasks back) and `GET /readyz` (database reachable, queues subscribed, not
 * draining). Neither needs a token: they reveal no more than up or down.
 */
export async function serveHealth(options: {
  port: number;
  host: string;
  checks: HealthChecks;
  /** A database check slower than this counts as unreachable. */
  timeoutMs?: number;
}): Promise<HealthServer> {
  const timeoutMs = options.timeoutMs ?? 2000;
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, body: unknown) =>
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return send(405, { error: 'method_not_allowed' });
    if (path === '/healthz') return send(200, { ok: true });
    if (path !== '/readyz') return send(404, { error: 'not_found' });
    void readiness(options.checks, timeoutMs).then((checks) => {
      const ok = checks.database && checks.subscribed && !checks.draining;
      send(ok ? 200 : 503, { ok, checks });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function readiness(checks: HealthChecks, timeoutMs: number) {
  let timer: NodeJS.Timeout | undefined;
  const database = await Promise.race([
    checks.database().catch(() => false),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    }),
  ]);
  clearTimeout(timer);
  return { database, subscribed: checks.subscribed(), draining: checks.draining() };
}
