import http from 'node:http';
import type https from 'node:https';
import type { Logger } from '@mtg/log';

/** How long in-flight requests may run after SIGTERM (deploy/ grace periods exceed it). */
export const DEFAULT_DRAIN_MS = 10_000;

export interface ServeOptions {
  port: number;
  host: string;
  logger: Logger;
  /** The service named in the ready message to a parent launcher. */
  service: string;
  /** The URL logged and reported as ready; default: http://host:port as bound. */
  url?: string;
  /** Runs once the server has closed, before the process exits 0 (pools, tracing). */
  onClose: () => Promise<void>;
  /** How long in-flight requests may run after the signal; default DEFAULT_DRAIN_MS. */
  drainMs?: number;
  /** Builds the server around the listener (the gateway's HTTPS one); default plain HTTP. */
  createServer?: (listener: http.RequestListener) => http.Server | https.Server;
}

/**
 * Listens, reports readiness to a parent launcher, and on SIGTERM/SIGINT (or the launcher
 * going away) stops accepting, lets in-flight requests finish (bounded: an SSE stream would
 * otherwise hold it open), runs onClose, and exits 0. The gateway, the downstream and the
 * cell router all stop this way.
 */
export async function serveUntilSignalled(
  app: http.RequestListener,
  options: ServeOptions,
): Promise<void> {
  let stopping = false;
  // While draining, idle keep-alive connections are closed at once and then every 100 ms (see
  // stop()). A request that still arrives on one in that window is served, with
  // `Connection: close`, so the connection ends with its answer and the client's next request
  // opens a connection to a replica that is up: the client sees no error, and no connection
  // outlives its last answer.
  const gate: http.RequestListener = (req, res) => {
    if (stopping) res.setHeader('connection', 'close');
    return app(req, res);
  };
  const server = (options.createServer ?? http.createServer)(gate);
  // Slow clients must not hold sockets forever: receiving a request (not answering it, a
  // stream may run for minutes) is bounded.
  server.headersTimeout = 15_000;
  server.requestTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const url = options.url ?? boundUrl(server, options.host);
  options.logger.info('listening', { url });
  process.send?.({ type: 'ready', service: options.service, url });

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

function boundUrl(server: http.Server | https.Server, host: string): string {
  const { port } = server.address() as { port: number };
  // node's https.Server is a tls.Server, not an http.Server.
  const scheme = server instanceof http.Server ? 'http' : 'https';
  return `${scheme}://${host.includes(':') ? `[${host}]` : host}:${port}`;
}
