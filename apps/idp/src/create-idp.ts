import { nowMs } from '@mtg/clock';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import express, { type NextFunction, type Request, type Response } from 'express';
import type Provider from 'oidc-provider';
import { createLogger, type Logger } from '@mtg/log';
import type { StaticClientId } from './clients.ts';
import { createProvider } from './create-provider.ts';
import { adminRoutes } from './http/admin-routes.ts';
import { interactionRoutes } from './http/interaction-routes.ts';
import { renderErrorPage } from './http/pages.ts';
import {
  defaultExchangeTargets,
  isKnownResource,
  type ExchangeTargets,
  type Resources,
} from './resources.ts';
import { loadOrCreateSigningKey, publicJwk } from './signing-key.ts';
import { createSecurityEventTransmitter, type PushTarget } from './ssf/push-security-events.ts';
import { ssfConfiguration } from './ssf/ssf-configuration.ts';
import { createUserStore, type UserStore } from './user-store.ts';
import { createOwnTokenVerifier } from './verify-own-token.ts';

export interface IdpOptions {
  /** The issuer identifier, e.g. http://127.0.0.1:9400. */
  issuer: string;
  /** State lives in `<dataDir>/idp/`: signing-key.json and users.json. */
  dataDir: string;
  clientSecrets: Record<StaticClientId, string>;
  /** Bearer token of the admin API. */
  adminToken: string;
  resources: Resources;
  /**
   * Per client, the resources it may exchange for, over the defaults (mcp-gateway: the
   * worker; mcp-worker: the downstream). Each must be one of `resources`.
   */
  exchangeTargets?: ExchangeTargets;
  /** Default and maximum access token lifetime, seconds. */
  accessTokenTtl: number;
  /** Where security events are pushed on disable/enable; none when unset. */
  ssfPush?: PushTarget;
  logger?: Logger;
  fetch?: typeof fetch;
  /** Epoch milliseconds; used for token iat/exp of the custom grants, SETs and user records. */
  now?: () => number;
}

export interface RunningIdp {
  /** The URL the server listens on (the issuer unless IDP_ISSUER names another). */
  url: string;
  close(): Promise<void>;
}

export interface Idp {
  /** The HTTP handler: oidc-provider plus the login pages, admin API and SSF metadata. */
  app: express.Express;
  issuer: string;
  provider: Provider;
  users: UserStore;
  /** Key id of the signing key (stable across restarts with the same data dir). */
  kid: string;
  listen(port: number, host: string): Promise<RunningIdp>;
}

export async function createIdp(options: IdpOptions): Promise<Idp> {
  const logger = options.logger ?? createLogger('idp');
  const now = options.now ?? nowMs;
  const stateDir = path.join(options.dataDir, 'idp');
  const signingKey = await loadOrCreateSigningKey(path.join(stateDir, 'signing-key.json'));
  const users = createUserStore(path.join(stateDir, 'users.json'), now);
  const exchangeTargets = {
    ...defaultExchangeTargets(options.resources),
    ...options.exchangeTargets,
  };
  for (const [client, targets] of Object.entries(exchangeTargets)) {
    const unknown = targets.find((t) => !isKnownResource(options.resources, t));
    if (unknown)
      throw new TypeError(`exchange target ${unknown} of ${client} is no known resource`);
  }

  const provider = createProvider({
    issuer: options.issuer,
    signingKey,
    clientSecrets: options.clientSecrets,
    resources: options.resources,
    exchangeTargets,
    accessTokenTtl: options.accessTokenTtl,
    users,
    verifyOwnToken: createOwnTokenVerifier({
      issuer: options.issuer,
      publicKey: publicJwk(signingKey),
      now,
    }),
    logger,
    now,
  });
  const transmitter = createSecurityEventTransmitter({
    issuer: options.issuer,
    audience: options.resources.gateway,
    signingKey,
    target: options.ssfPush,
    fetch: options.fetch,
    now,
    logger,
  });

  const app = express();
  app.disable('x-powered-by');
  const ssfMetadata = ssfConfiguration(options.issuer, provider.urlFor('jwks'));
  app.get('/.well-known/ssf-configuration', (_req, res) => {
    res.set('Access-Control-Allow-Origin', '*').json(ssfMetadata);
  });
  app.use(adminRoutes({ adminToken: options.adminToken, users, transmitter, logger }));
  app.use(interactionRoutes({ provider, users, logger }));
  app.use(provider.callback());
  app.use(
    (
      error: Error & { status?: number; error?: string; error_description?: string },
      req: Request,
      res: Response,
      _next: NextFunction,
    ) => {
      const status = error.status && error.status < 500 ? error.status : 500;
      if (status === 500) logger.error('request failed', { path: req.path, error });
      const out = {
        error: error.error ?? (status === 500 ? 'server_error' : 'invalid_request'),
        error_description:
          status === 500 ? 'internal error' : (error.error_description ?? error.message),
      };
      if (req.path.startsWith('/admin')) res.status(status).json(out);
      else res.status(status).type('html').send(renderErrorPage(out));
    },
  );

  return {
    app,
    issuer: options.issuer,
    provider,
    users,
    kid: signingKey.kid,
    listen: (port, host) => listen(app, port, host),
  };
}

/** Starts an HTTP server for `handler`; close() also drops idle keep-alive connections. */
export function listen(
  handler: http.RequestListener,
  port: number,
  host: string,
  server: http.Server = http.createServer(),
): Promise<RunningIdp> {
  return new Promise((resolve, reject) => {
    server.on('request', handler);
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve({ url: serverUrl(server), close: () => closeServer(server) });
    });
  });
}

function serverUrl(server: http.Server): string {
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  return `http://${host}:${port}`;
}

function closeServer(server: http.Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.close((error) => (error ? reject(error) : resolve()));
    server.closeIdleConnections();
  });
}

export type StartIdpOptions = Omit<IdpOptions, 'issuer'> & {
  /** Defaults to the URL bound, with 127.0.0.1 for a wildcard host. */
  issuer?: string;
  port: number;
  host: string;
};

/**
 * Binds first, then creates the IdP, so that port 0 works and the default issuer names the
 * port actually bound. Used by main.ts and the tests.
 */
export async function startIdp(options: StartIdpOptions): Promise<{ idp: Idp } & RunningIdp> {
  const { port, host, issuer, ...rest } = options;
  const server = http.createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  try {
    const bound = serverUrl(server);
    const idp = await createIdp({ ...rest, issuer: issuer ?? defaultIssuer(bound) });
    server.on('request', idp.app);
    return { idp, url: bound, close: () => closeServer(server) };
  } catch (error) {
    await closeServer(server);
    throw error;
  }
}

function defaultIssuer(bound: string): string {
  const url = new URL(bound);
  if (url.hostname === '0.0.0.0' || url.hostname === '[::]') url.hostname = '127.0.0.1';
  return url.origin;
}
