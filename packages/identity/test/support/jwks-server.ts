import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { JSONWebKeySet } from 'jose';

/**
 * The JWKS endpoint of an issuer, on loopback. `served` counts answered requests; `close()`
 * is an outage (connections refused afterwards).
 */
export type JwksServer = {
  url: string;
  served: number;
  setKeys(jwks: JSONWebKeySet): void;
  close(): Promise<void>;
};

export async function startJwksServer(
  jwks: JSONWebKeySet,
  options: { hang?: boolean } = {},
): Promise<JwksServer> {
  let current = jwks;
  const server: Server = createServer((req, res) => {
    if (options.hang) return; // never answers: a stuck issuer
    state.served++;
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(current));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const state: JwksServer = {
    url: `http://127.0.0.1:${port}/jwks`,
    served: 0,
    setKeys(next) {
      current = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return state;
}

/** fetch that counts attempts, including those that fail to connect. */
export function countingFetch() {
  const counter = {
    attempts: 0,
    fetch: ((input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
      counter.attempts++;
      return fetch(input, init);
    }) as typeof fetch,
  };
  return counter;
}
