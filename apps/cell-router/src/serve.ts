import http from 'node:http';
import type { Logger } from '@mtg/log';

/**
 * Listens, reports readiness to a parent launcher, and on SIGTERM/SIGINT (or the launcher
 * going away) stops accepting, lets in-flight requests finish (bounded: an SSE stream would
 * otherwise hold it open), runs onClose, and exits 0.
 */
export async function serveUntilSignalled(
  app: http.RequestListener,
  options: {
    port: number;
    host: string;
    logger: Logger;
    url: string;
    onClose: () => Promise<void>;
    drainMs?: number;
  },
): Promise<void> {
  const server = http.createServer(app);
  server.headersTimeout = 15_000;
  // Receiving a request (not answering it: a stream may run for minutes).
  server.requestTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  options.logger.info('listening', { url: options.url });
  process.send?.({ type: 'ready', service: 'cell-router', url: options.url });
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    options.logger.info('stopping', { signal });
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
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
  process.on('disconnect', () => void stop('launcher gone'));
}
