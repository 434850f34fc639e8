import http from 'node:http';
import type { Express } from 'express';
import type { Logger } from '@mtg/log';

/**
 * Listens, reports readiness to a parent launcher, and on SIGTERM/SIGINT (or the launcher
 * going away) stops accepting, lets in-flight requests finish (bounded), runs onClose, and
 * exits 0.
 */
export async function serveUntilSignalled(
  app: Express,
  options: {
    port: number;
    host: string;
    logger: Logger;
    service: string;
    onClose: () => Promise<void>;
    drainMs?: number;
  },
): Promise<void> {
  const server = http.createServer(app);
  server.headersTimeout = 15_000;
  server.requestTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as { port: number };
  const url = `http://${options.host.includes(':') ? `[${options.host}]` : options.host}:${port}`;
  options.logger.info('listening', { url });
  process.send?.({ type: 'ready', service: options.service, url });

  let stopping = false;
  const stop = async (reason: string) => {
    if (stopping) return;
    stopping = true;
    options.logger.info('stopping', { reason });
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const drain = setTimeout(() => server.closeAllConnections(), options.drainMs ?? 10_000);
    await closed;
    clearTimeout(drain);
    await options.onClose();
    options.logger.info('stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('disconnect', () => void stop('launcher gone'));
}
