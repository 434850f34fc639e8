import * as oidc from 'openid-client';
import { oauthClientConfiguration } from './oauth-client-configuration.ts';

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

/**
 * How the authorization server takes an exchange (docs/identity.md, "Issuers and exchange styles"):
 * - `rfc8693-resource`: RFC 8693 with a `resource` indicator (the dev IdP, oidc-provider);
 * - `rfc8693-audience`: RFC 8693 with `audience` (Keycloak, Okta, Auth0 on-behalf-of);
 * - `entra-obo`: Entra ID on-behalf-of (jwt-bearer + requested_token_use), scope `<app>/.default`.
 */
export type ExchangeStyle = 'rfc8693-resource' | 'rfc8693-audience' | 'entra-obo';

export interface ExchangeRequest {
  subjectToken: string;
  /** The requesting client's own token, sent as the RFC 8693 actor_token when given. */
  actorToken?: string;
  /** Target service: resource / audience URI (for entra-obo, the scope is derived from it). */
  target: string;
  scope: string[];
  /** Requested lifetime, seconds (a dev IdP extension; others ignore it). */
  ttlSeconds?: number;
}

export interface ExchangedToken {
  accessToken: string;
  expiresAt: number; // epoch ms
  scope: string[];
}

export type ExchangeOutcome =
  | { ok: true; token: ExchangedToken }
  | { ok: false; error: string; description: string; status?: number };

/** The form parameters of one exchange, per style (pure; tested on its own). */
export function exchangeParameters(
  style: ExchangeStyle,
  r: ExchangeRequest,
): { grantType: string; params: Record<string, string> } {
  if (style === 'entra-obo') {
    return {
      grantType: JWT_BEARER,
      params: {
        assertion: r.subjectToken,
        requested_token_use: 'on_behalf_of',
        scope: r.scope.length ? r.scope.join(' ') : `${r.target.replace(/\/$/, '')}/.default`,
      },
    };
  }
  return {
    grantType: TOKEN_EXCHANGE,
    params: {
      subject_token: r.subjectToken,
      subject_token_type: ACCESS_TOKEN_TYPE,
      requested_token_type: ACCESS_TOKEN_TYPE,
      [style === 'rfc8693-resource' ? 'resource' : 'audience']: r.target,
      ...(r.scope.length ? { scope: r.scope.join(' ') } : {}),
      ...(r.actorToken ? { actor_token: r.actorToken, actor_token_type: ACCESS_TOKEN_TYPE } : {}),
      ...(r.ttlSeconds ? { ttl: String(Math.max(1, Math.floor(r.ttlSeconds))) } : {}),
    },
  };
}

/** A token-exchange client for one confidential client of one issuer. */
export function createTokenExchanger(options: {
  issuer: string;
  clientId: string;
  clientSecret: string;
  style: ExchangeStyle;
  now?: () => number;
}) {
  const now = options.now ?? Date.now;
  const discover = oauthClientConfiguration(options);
  return {
    async exchange(request: ExchangeRequest): Promise<ExchangeOutcome> {
      const { grantType, params } = exchangeParameters(options.style, request);
      try {
        const response = await oidc.genericGrantRequest(await discover(), grantType, params);
        return {
          ok: true,
          token: {
            accessToken: response.access_token,
            expiresAt: now() + (response.expires_in ?? 60) * 1000,
            scope: (response.scope ?? request.scope.join(' ')).split(' ').filter(Boolean),
          },
        };
      } catch (error) {
        if (error instanceof oidc.ResponseBodyError) {
          return {
            ok: false,
            error: error.error,
            description: error.error_description ?? error.error,
            status: error.status,
          };
        }
        throw error; // an outage, not a refusal
      }
    },
  };
}

export type TokenExchanger = ReturnType<typeof createTokenExchanger>;
