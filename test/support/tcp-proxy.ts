import net from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * A TCP relay on loopback that can be cut: `down()` closes every relayed connection and
 * refuses new ones (ECONNREFUSED), `up()` listens again on the same port. Stands between a
 * process and PostgreSQL to make the database "go away" without touching the server.
 */
export interface TcpProxy {
  port: number;
  /** `url` with its host and port replaced by the proxy's. */
  via(url: string): string;
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  let port = 0;

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      const s = net.createServer((inbound) => {
        const outbound = net.connect(target.port, target.host);
        for (const [a, b] of [
          [inbound, outbound],
          [outbound, inbound],
        ] as const) {
          sockets.add(a);
          a.on('close', () => {
            sockets.delete(a);
            b.destroy();
          });
          a.on('error', () => b.destroy());
          a.pipe(b);
        }
      });
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => {
        port = (s.address() as AddressInfo).port;
        server = s;
        resolve();
      });
    });
  const stop = async () => {
    const s = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    if (s) await new Promise<void>((r) => s.close(() => r()));
  };

  await listen();
  return {
    port,
    via(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    down: stop,
    up: listen,
    close: stop,
  };
}
