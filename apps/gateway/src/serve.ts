import type https from 'node:https';
import type { Express } from 'express';
import type { Logger } from '@mtg/log';
import { createGatewayServer } from './tls.ts';

/** How long in-flight requests may run after SIGTERM (deploy/ grace periods exceed it). */
export const DEFAULT_DRAIN_MS = 10_000;

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
  // While draining, idle keep-alive connections are closed at once and then every 100 ms (see
  // stop()). A request that still arrives on one in that window is served, with
  // `Connection: close`, so the connection ends with its answer and the client's next request
  // opens a connection to a replica that is up: the client sees no error, and no connection
  // outlives its last answer.
  const gate = ((req: Parameters<Express>[0], res: Parameters<Express>[1]) => {
    if (stopping) res.setHeader('connection', 'close');
    app(req, res);
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
    const drain = setTimeout(
      () => server.closeAllConnections(),
      options.drainMs ?? DEFAULT_DRAIN_MS,
    );
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
