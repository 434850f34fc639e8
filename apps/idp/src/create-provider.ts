import { randomBytes } from 'node:crypto';
import Provider, { errors, type Configuration, type KoaContextWithOIDC } from 'oidc-provider';
import type { Logger } from '@mtg/log';
import { decodeAccountId } from './account-id.ts';
import { staticClients, type StaticClientId } from './clients.ts';
import { DEV_USER_GRANT, TOKEN_EXCHANGE_GRANT } from './grant-types.ts';
import { DEV_USER_PARAMS, devUserGrant } from './grants/dev-user-grant.ts';
import {
  TOKEN_EXCHANGE_DUPLICABLE,
  TOKEN_EXCHANGE_PARAMS,
  tokenExchangeGrant,
} from './grants/token-exchange-grant.ts';
import { resourceServerInfo, scopesOf, type ExchangeTargets, type Resources } from './resources.ts';
import { SIGNING_ALG, type SigningJwk } from './signing-key.ts';
import type { UserStore } from './user-store.ts';
import type { VerifyOwnTokenResult } from './verify-own-token.ts';
import { renderErrorPage } from './http/pages.ts';
import { memoryAdapterFactory } from './memory-adapter.ts';

export interface ProviderOptions {
  issuer: string;
  signingKey: SigningJwk;
  clientSecrets: Record<StaticClientId, string>;
  resources: Resources;
  exchangeTargets: ExchangeTargets;
  accessTokenTtl: number;
  users: UserStore;
  verifyOwnToken: (token: string) => Promise<VerifyOwnTokenResult>;
  logger: Logger;
  now: () => number;
}

const DAY = 24 * 60 * 60;

const isLoopbackOrigin = (origin: string) => {
  const url = URL.parse(origin);
  return (
    !!url && url.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)
  );
};

/** The oidc-provider instance: clients, keys, JWT access tokens per resource, custom grants. */
export function createProvider(options: ProviderOptions): Provider {
  const { resources, accessTokenTtl, users } = options;

  const configuration: Configuration = {
    adapter: memoryAdapterFactory(),
    responseTypes: ['code'],
    clients: staticClients(options.clientSecrets),
    jwks: { keys: [options.signingKey] },
    clientDefaults: { id_token_signed_response_alg: SIGNING_ALG },
    // Resource scopes are listed too so that discovery advertises them (scopes_supported).
    scopes: ['openid', 'offline_access', ...scopesOf(resources)],
    claims: { openid: ['sub', 'tenant'] },
    // Cookies only carry the login interaction of this process; sessions are in memory.
    cookies: { keys: [randomBytes(32).toString('base64url')] },
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      // Open dynamic registration so MCP Inspector and other MCP clients can register
      // themselves. Development only (docs/dev-idp.md).
      registration: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // A request naming no resource gets a token for the gateway, the usual audience.
        defaultResource: (_ctx, _client, oneOf) => oneOf ?? resources.gateway,
        // Keep issuing for the granted resource even when openid was requested.
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => {
          const info = resourceServerInfo(resources, resource, accessTokenTtl);
          if (!info) throw new errors.InvalidTarget(`unknown resource ${JSON.stringify(resource)}`);
          return info;
        },
      },
    },
    // MCP clients are OAuth clients, not OpenID ones: a refresh token whenever the client may
    // use one, not only with offline_access (which OIDC also ties to prompt=consent).
    issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    findAccount: async (_ctx, accountId) => {
      const key = decodeAccountId(accountId);
      if (!key) return undefined;
      // A disabled user has no account: logins, refreshes and code redemptions fail.
      if ((await users.get(key))?.disabled) return undefined;
      return {
        accountId,
        claims: () => ({ sub: accountId, tenant: key.tenant }),
      };
    },
    // The return value replaces token.extra, so keep what a grant put there (act).
    extraTokenClaims: (_ctx, token) => {
      const key = token.kind === 'AccessToken' ? decodeAccountId(token.accountId) : undefined;
      return {
        ...token.extra,
        ...(key ? { tenant: key.tenant } : {}),
        azp: token.clientId,
      };
    },
    formats: {
      customizers: {
        // The account id encodes tenant and sub; the token's sub is the user name alone.
        jwt: (_ctx, token, { payload }) => {
          if (token.kind !== 'AccessToken') return;
          const key = decodeAccountId(token.accountId);
          if (key) payload.sub = key.sub;
        },
      },
    },
    clientBasedCORS: (_ctx, origin) => isLoopbackOrigin(origin),
    ttl: {
      AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? accessTokenTtl,
      ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? accessTokenTtl,
      AuthorizationCode: 60,
      IdToken: 3600,
      Interaction: 3600,
      RefreshToken: 14 * DAY,
      Session: 14 * DAY,
      Grant: 14 * DAY,
    },
    renderError: (ctx: KoaContextWithOIDC, out) => {
      ctx.type = 'html';
      ctx.body = renderErrorPage(out);
    },
  };

  const provider = new Provider(options.issuer, configuration);

  provider.registerGrantType(
    DEV_USER_GRANT,
    devUserGrant({ users, resources, accessTokenTtl, now: options.now }),
    DEV_USER_PARAMS,
    ['resource'],
  );
  provider.registerGrantType(
    TOKEN_EXCHANGE_GRANT,
    tokenExchangeGrant({
      users,
      resources,
      exchangeTargets: options.exchangeTargets,
      accessTokenTtl,
      verifyOwnToken: options.verifyOwnToken,
      now: options.now,
    }),
    TOKEN_EXCHANGE_PARAMS,
    TOKEN_EXCHANGE_DUPLICABLE,
  );

  const log = options.logger;
  provider.on('server_error', (_ctx, error) => log.error('oidc-provider server error', { error }));
  provider.on('grant.error', (ctx, error) =>
    log.info('grant refused', {
      client: ctx.oidc.client?.clientId,
      grantType: ctx.oidc.params?.grant_type,
      error: error.error ?? error.message,
      description: error.error_description,
    }),
  );
  provider.on('grant.success', (ctx) =>
    log.info('token issued', {
      client: ctx.oidc.client?.clientId,
      grantType: ctx.oidc.params?.grant_type,
    }),
  );
  return provider;
}
