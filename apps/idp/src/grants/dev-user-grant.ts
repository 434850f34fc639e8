import { errors } from 'oidc-provider';
import type { TokenEndpointGrantContext } from 'oidc-provider';
import { isAgentClient } from '../clients.ts';
import { DEV_USER_GRANT } from '../grant-types.ts';
import { defaultUserScopes, splitScope, type Resources } from '../resources.ts';
import type { UserStore } from '../user-store.ts';
import { issueAccessToken } from './issue-access-token.ts';
import {
  oneValue,
  parseTtl,
  requireIdentifier,
  resolveTarget,
  type ParamValue,
} from './grant-params.ts';

export const DEV_USER_PARAMS = ['sub', 'tenant', 'scope', 'resource', 'ttl'] as const;

interface DevUserParams {
  sub?: string;
  tenant?: string;
  ttl?: string;
  resource?: ParamValue;
}

export interface DevUserGrantDeps {
  users: UserStore;
  resources: Resources;
  accessTokenTtl: number;
  now: () => number;
}

/**
 * `urn:mcp-task-gateway:grant-type:dev-user`: an agent client, authenticated with its
 * secret, gets an access token for any (tenant, sub) without a browser. Development only:
 * it is the password grant without the password.
 */
export function devUserGrant(deps: DevUserGrantDeps) {
  return async function devUserGrantHandler(
    ctx: TokenEndpointGrantContext<DevUserParams>,
  ): Promise<void> {
    const { client, params } = ctx.oidc;
    if (client.clientAuthMethod === 'none' || !isAgentClient(client.clientId)) {
      throw new errors.UnauthorizedClient(
        'the dev-user grant is reserved to the confidential agent clients mcp-agent and mcp-agent-2',
      );
    }
    const sub = requireIdentifier('sub', params.sub);
    const tenant = requireIdentifier('tenant', params.tenant);
    const ttl = parseTtl(params.ttl, deps.accessTokenTtl) ?? deps.accessTokenTtl;
    const target = resolveTarget(
      deps.resources,
      oneValue('resource', params.resource) ?? deps.resources.gateway,
      deps.accessTokenTtl,
    );

    const requested = splitScope(params.scope);
    const scope = requested.length ? requested : defaultUserScopes(deps.resources);
    const available = new Set(target.resourceServer.scope.split(' '));
    const unavailable = scope.find((s) => !available.has(s));
    if (unavailable) {
      throw new errors.InvalidScope(
        `scope ${unavailable} is not available for ${target.resource}`,
        unavailable,
      );
    }

    const user = await deps.users.ensure({ tenant, sub });
    if (user.disabled) {
      throw new errors.CustomOIDCProviderError(
        'invalid_grant',
        `user ${sub} in tenant ${tenant} is disabled`,
      );
    }

    const iat = Math.floor(deps.now() / 1000);
    const issued = await issueAccessToken(ctx, {
      ...target,
      user: { tenant, sub },
      scope,
      iat,
      exp: iat + ttl,
      grantType: DEV_USER_GRANT,
    });
    ctx.body = {
      access_token: issued.accessToken,
      token_type: issued.tokenType,
      expires_in: issued.expiresIn,
      scope: issued.scope,
    };
  };
}
