import type { KoaContextWithOIDC, ResourceServer } from 'oidc-provider';
import { encodeAccountId, type UserKey } from '../account-id.ts';

export interface AccessTokenRequest {
  /** The resource indicator; the token's `aud`. */
  resource: string;
  resourceServer: ResourceServer;
  user: UserKey;
  scope: readonly string[];
  /** Absolute expiry, epoch seconds. */
  exp: number;
  /** Issued-at, epoch seconds. */
  iat: number;
  /** Extra claims kept in the token (e.g. `act`); tenant and azp are added by extraTokenClaims. */
  extra?: Record<string, unknown>;
  /** The grant type, recorded as oidc-provider's `gty`. */
  grantType: string;
}

export interface IssuedAccessToken {
  accessToken: string;
  expiresIn: number;
  scope: string;
  tokenType: string;
}

/**
 * Issues a user access token through oidc-provider's own AccessToken model, so custom-grant
 * tokens get the same format, key, customizers and claims as authorization-code tokens.
 */
export async function issueAccessToken(
  ctx: KoaContextWithOIDC,
  request: AccessTokenRequest,
): Promise<IssuedAccessToken> {
  const { provider, client } = ctx.oidc;
  if (!client) throw new TypeError('issueAccessToken needs an authenticated client');
  const scope = request.scope.join(' ');
  // The typings make grantId mandatory; these tokens come from no stored Grant, and a JWT
  // access token never carries the grant id, so it stays unset.
  const properties = {
    client,
    accountId: encodeAccountId(request.user),
    resourceServer: new provider.ResourceServer(request.resource, request.resourceServer),
    scope,
    gty: request.grantType,
    iat: request.iat,
    exp: request.exp,
    expiresIn: request.exp - request.iat,
    extra: request.extra,
  } as unknown as ConstructorParameters<typeof provider.AccessToken>[0];
  const token = new provider.AccessToken(properties);
  ctx.oidc.entity('AccessToken', token);
  const accessToken = await token.save();
  return { accessToken, expiresIn: request.exp - request.iat, scope, tokenType: token.tokenType };
}
