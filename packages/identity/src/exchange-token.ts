import { nowMs } from '@mtg/clock';
import { decodeJwt } from 'jose';
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
  /** Epoch ms: the token's `exp` when it has one, else now + `expires_in`. */
  expiresAt: number;
  scope: string[];
  /** The issued token's `sub` and `act` (RFC 8693 §4.1), read here so no caller decodes it. */
  subject: string;
  actor: unknown;
}

/**
 * Why the authorization server refused an exchange, as callers decide on it:
 * - `subject_disabled`: the user behind the subject token is disabled (a revocation);
 * - `subject_expired`: the subject token (a task's delegation) has expired;
 * - `refused`: any other refusal.
 */
export type ExchangeRefusalCode = 'subject_disabled' | 'subject_expired' | 'refused';

export type ExchangeOutcome =
  | { ok: true; token: ExchangedToken }
  | {
      ok: false;
      code: ExchangeRefusalCode;
      error: string;
      description: string;
      status?: number;
    };

/**
 * RFC 8693 gives a refusal only `invalid_grant` and a text: this is the one place that reads
 * the text, and it yields a code.
 */
function refusalCode(description: string): ExchangeRefusalCode {
  if (/disabled/i.test(description)) return 'subject_disabled';
  if (/expired/i.test(description)) return 'subject_expired';
  return 'refused';
}

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
  const now = options.now ?? nowMs;
  const discover = oauthClientConfiguration(options);
  return {
    async exchange(request: ExchangeRequest): Promise<ExchangeOutcome> {
      const { grantType, params } = exchangeParameters(options.style, request);
      let response;
      try {
        response = await oidc.genericGrantRequest(await discover(), grantType, params);
      } catch (error) {
        if (error instanceof oidc.ResponseBodyError) {
          const description = error.error_description ?? error.error;
          return {
            ok: false,
            code: refusalCode(description),
            error: error.error,
            description,
            status: error.status,
          };
        }
        // An outage, not a refusal: the endpoint may have moved, so the IdP's metadata is
        // looked up again (at most every DISCOVERY_RETRY_MS) before a later exchange.
        discover.invalidate();
        throw error;
      }
      // Issued to us by the authorization server, over TLS: read, not verified (its audience
      // is the target, which verifies it).
      const claims = decodeJwt(response.access_token);
      return {
        ok: true,
        token: {
          accessToken: response.access_token,
          expiresAt:
            typeof claims.exp === 'number'
              ? claims.exp * 1000
              : now() + (response.expires_in ?? 60) * 1000,
          scope: (response.scope ?? request.scope.join(' ')).split(' ').filter(Boolean),
          subject: String(claims.sub),
          actor: claims.act ?? null,
        },
      };
    },
  };
}

export type TokenExchanger = ReturnType<typeof createTokenExchanger>;
