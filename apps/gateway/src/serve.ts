import type https from 'node:https';
import type { Express } from 'express';
import type { Logger } from '@mtg/log';
import { createGatewayServer } from './tls.ts';

/**
 * Listens, reports readiness to a parent launcher, and on SIGTERM/SIGINT stops accepting,
 * lets in-flight requests finish (bounded), runs onClose, and exits 0.
 */
export async function serveUntilSignalled(
  app: Express,
  options: {
    port: number;
    host: string;
    logger: Logger;
    ready: { service: string; url: string };
    onClose: () => Promise<void>;
    drainMs?: number;
    /** Serve HTTPS with these options (tls.ts); plain HTTP without. */
    tls?: https.ServerOptions;
  },
): Promise<void> {
  let stopping = false;
  // While draining, a request that arrives on an already open keep-alive connection is a
  // new request: refuse it (503, Connection: close) so the client goes to another replica,
  // while the requests already in flight finish.
  const gate = ((req: Parameters<Express>[0], res: Parameters<Express>[1]) => {
    if (!stopping) return app(req, res);
    res.writeHead(503, {
      'content-type': 'application/json',
      connection: 'close',
      'retry-after': '1',
    });
    res.end(
      JSON.stringify({
        error: 'unavailable',
        error_description: 'this gateway replica is shutting down; retry',
      }),
    );
  }) as unknown as Express;
  const server = createGatewayServer(gate, options.tls);
  // Slow clients must not hold sockets forever.
  server.headersTimeout = 15_000;
  server.requestTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  options.logger.info('listening', { url: options.ready.url });
  process.send?.({ type: 'ready', ...options.ready });

  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    options.logger.info('stopping', { signal });
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    // Connections go idle as their in-flight request completes: close them as they do.
    const sweep = setInterval(() => server.closeIdleConnections(), 100);
    const drain = setTimeout(() => server.closeAllConnections(), options.drainMs ?? 10_000);
    await closed;
    clearInterval(sweep);
    clearTimeout(drain);
    await options.onClose();
    options.logger.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  // Started by a launcher that has gone away (e.g. SIGKILLed): do not outlive it.
  process.on('disconnect', () => void stop('launcher gone'));
}
