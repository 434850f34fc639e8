import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { scrapeAllowed } from './scrape-access.ts';

export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

/** A tiny HTTP server answering GET /metrics from `registry` (for processes without one). */
export async function serveMetrics(options: {
  registry: Registry;
  port: number;
  host: string;
  token?: string;
}): Promise<MetricsServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not_found"}');
      return;
    }
    if (
      !scrapeAllowed(
        { authorization: req.headers.authorization, remoteAddress: req.socket.remoteAddress },
        options.token,
      )
    ) {
      res
        .writeHead(options.token ? 401 : 403, { 'content-type': 'application/json' })
        .end('{"error":"forbidden"}');
      return;
    }
    options.registry.metrics().then(
      (body) => res.writeHead(200, { 'content-type': options.registry.contentType }).end(body),
      (error: unknown) => {
        res
          .writeHead(500, { 'content-type': 'text/plain' })
          .end(`metrics failed: ${error instanceof Error ? error.message : String(error)}`);
      },
    );
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
