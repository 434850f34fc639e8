import { errors } from 'oidc-provider';
import type { TokenEndpointGrantContext } from 'oidc-provider';
import { TOKEN_EXCHANGE_GRANT, TOKEN_TYPE_ACCESS_TOKEN, TOKEN_TYPE_JWT } from '../grant-types.ts';
import {
  resourceServedBy,
  splitScope,
  type ExchangeTargets,
  type Resources,
} from '../resources.ts';
import type { UserStore } from '../user-store.ts';
import type { Actor, VerifyOwnTokenResult } from '../verify-own-token.ts';
import { issueAccessToken } from './issue-access-token.ts';
import { oneValue, parseTtl, resolveTarget, type ParamValue } from './grant-params.ts';

export const TOKEN_EXCHANGE_PARAMS = [
  'subject_token',
  'subject_token_type',
  'actor_token',
  'actor_token_type',
  'requested_token_type',
  'resource',
  'audience',
  'scope',
  'ttl',
] as const;

/** Parameters that may repeat on the wire, so that a repeat is refused with a clear error. */
export const TOKEN_EXCHANGE_DUPLICABLE = ['resource', 'audience'] as const;

interface TokenExchangeParams {
  subject_token?: string;
  subject_token_type?: string;
  actor_token?: string;
  actor_token_type?: string;
  requested_token_type?: string;
  resource?: ParamValue;
  audience?: ParamValue;
  ttl?: string;
}

export interface TokenExchangeGrantDeps {
  users: UserStore;
  resources: Resources;
  /** What each client may exchange for (a client not named: any known resource). */
  exchangeTargets: ExchangeTargets;
  accessTokenTtl: number;
  /**
   * Upper bound of a task-bound delegation (the gateway exchanging a user's token for the
   * worker audience). Such a delegation may outlive the user's access token — it is bound
   * to the task's deadline instead — because it is narrowed to one audience and one tool's
   * scope, and every later exchange of it is checked against the user's status here.
   */
  maxDelegationTtl?: number;
  verifyOwnToken: (token: string) => Promise<VerifyOwnTokenResult>;
  now: () => number;
}

const TOKEN_TYPES = new Set([TOKEN_TYPE_ACCESS_TOKEN, TOKEN_TYPE_JWT]);

const invalidGrant = (description: string) =>
  new errors.CustomOIDCProviderError('invalid_grant', description);

/**
 * RFC 8693 token exchange for delegation: the new token keeps the subject's `sub` and
 * `tenant`, names the requesting client in `act` (nesting any earlier actor), is issued to
 * that client, targets exactly one known resource the client may exchange for, never widens the subject's scopes and
 * never outlives the subject token. Disabled users are refused.
 */
export function tokenExchangeGrant(deps: TokenExchangeGrantDeps) {
  return async function tokenExchangeGrantHandler(
    ctx: TokenEndpointGrantContext<TokenExchangeParams>,
  ): Promise<void> {
    const { client, params } = ctx.oidc;
    const clientId = client.clientId;
    if (client.clientAuthMethod === 'none') {
      throw new errors.UnauthorizedClient('token exchange requires an authenticated client');
    }

    if (!params.subject_token) throw new errors.InvalidRequest('subject_token is required');
    if (!params.subject_token_type || !TOKEN_TYPES.has(params.subject_token_type)) {
      throw new errors.InvalidRequest(
        `subject_token_type must be ${TOKEN_TYPE_ACCESS_TOKEN} or ${TOKEN_TYPE_JWT}`,
      );
    }
    if (params.requested_token_type && !TOKEN_TYPES.has(params.requested_token_type)) {
      throw new errors.InvalidRequest(
        `requested_token_type must be ${TOKEN_TYPE_ACCESS_TOKEN} (or ${TOKEN_TYPE_JWT})`,
      );
    }
    if (
      params.actor_token &&
      (!params.actor_token_type || !TOKEN_TYPES.has(params.actor_token_type))
    ) {
      throw new errors.InvalidRequest(
        `actor_token_type must be ${TOKEN_TYPE_ACCESS_TOKEN} or ${TOKEN_TYPE_JWT}`,
      );
    }
    if (!params.actor_token && params.actor_token_type) {
      throw new errors.InvalidRequest('actor_token_type given without actor_token');
    }

    const resource = oneValue('resource', params.resource);
    const audience = oneValue('audience', params.audience);
    if (resource && audience) {
      throw new errors.InvalidRequest('give exactly one of resource or audience, not both');
    }
    if (!resource && !audience) {
      throw new errors.InvalidRequest('resource or audience is required');
    }
    const target = resolveTarget(
      deps.resources,
      (resource ?? audience) as string,
      deps.accessTokenTtl,
      resource ? 'resource' : 'audience',
    );
    const allowed = deps.exchangeTargets[clientId];
    if (allowed && !allowed.includes(target.resource)) {
      throw new errors.InvalidTarget(
        `${clientId} may not exchange tokens for ${JSON.stringify(target.resource)}`,
      );
    }
    const delegation = clientId === 'mcp-gateway' && target.resource === deps.resources.worker;
    const maxTtl = delegation ? (deps.maxDelegationTtl ?? 86_400) : deps.accessTokenTtl;
    const ttl = parseTtl(params.ttl, maxTtl) ?? deps.accessTokenTtl;

    const verified = await deps.verifyOwnToken(params.subject_token);
    if (!verified.ok) {
      throw invalidGrant(
        verified.code === 'token_expired'
          ? 'subject_token has expired'
          : `subject_token is not a valid access token of this issuer: ${verified.message}`,
      );
    }
    const subject = verified.claims;
    if (!subject.tenant) {
      throw invalidGrant('subject_token does not represent a user (it has no tenant claim)');
    }
    // Only the party a token was given to may trade it: the client it was issued to, or the
    // service operating its audience (the gateway for tokens sent to the gateway).
    const served = resourceServedBy(deps.resources, clientId);
    const audiences = typeof subject.aud === 'string' ? [subject.aud] : (subject.aud ?? []);
    if (subject.client_id !== clientId && !(served && audiences.includes(served))) {
      throw invalidGrant(
        `subject_token was issued neither to ${clientId} nor for a resource ${clientId} operates`,
      );
    }

    if (params.actor_token) {
      const actor = await deps.verifyOwnToken(params.actor_token);
      if (!actor.ok) {
        throw invalidGrant(
          actor.code === 'token_expired'
            ? 'actor_token has expired'
            : `actor_token is not a valid access token of this issuer: ${actor.message}`,
        );
      }
      const own = actor.claims;
      if (own.client_id !== clientId || own.sub !== clientId || own.tenant !== undefined) {
        throw invalidGrant(
          `actor_token must be a client credentials token of the requesting client ${clientId}`,
        );
      }
    }

    const user = await deps.users.get({ tenant: subject.tenant, sub: subject.sub });
    if (user?.disabled) {
      throw invalidGrant(`user ${subject.sub} in tenant ${subject.tenant} is disabled`);
    }

    const held = splitScope(subject.scope);
    const available = new Set(target.resourceServer.scope.split(' '));
    const requested = splitScope(typeof params.scope === 'string' ? params.scope : undefined);
    for (const s of requested) {
      if (!held.includes(s)) {
        throw new errors.InvalidScope(`scope ${s} is not held by the subject_token`, s);
      }
      if (!available.has(s)) {
        throw new errors.InvalidScope(`scope ${s} is not available for ${target.resource}`, s);
      }
    }
    const scope = requested.length ? requested : held.filter((s) => available.has(s));
    if (!scope.length) {
      throw new errors.InvalidScope(`the subject_token holds no scope for ${target.resource}`, '');
    }

    const iat = Math.floor(deps.now() / 1000);
    // Every other exchange ends with its subject token; a task-bound delegation ends with
    // the task's deadline (its requested ttl), see maxDelegationTtl.
    const exp = delegation ? iat + ttl : Math.min(iat + ttl, subject.exp);
    if (exp <= iat) throw invalidGrant('subject_token has expired');

    const act: Actor = subject.act ? { sub: clientId, act: subject.act } : { sub: clientId };
    const issued = await issueAccessToken(ctx, {
      ...target,
      user: { tenant: subject.tenant, sub: subject.sub },
      scope,
      iat,
      exp,
      extra: { act },
      grantType: TOKEN_EXCHANGE_GRANT,
    });
    ctx.body = {
      access_token: issued.accessToken,
      issued_token_type: TOKEN_TYPE_ACCESS_TOKEN,
      token_type: issued.tokenType,
      expires_in: issued.expiresIn,
      scope: issued.scope,
    };
  };
}
