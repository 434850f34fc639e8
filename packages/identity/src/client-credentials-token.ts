import { nowMs, type Clock } from '@mtg/clock';
import * as oidc from 'openid-client';
import { oauthClientConfiguration } from './oauth-client-configuration.ts';

/**
 * A cached client-credentials access token for one resource, refreshed when it has less than
 * `refreshBeforeSeconds` left. Used by the worker for its own (workload) identity.
 */
export function clientCredentialsToken(options: {
  issuer: string;
  clientId: string;
  clientSecret: string;
  resource: string;
  scope?: string;
  refreshBeforeSeconds?: number;
  /** When the cached token counts as near expiry (default: the system clock). */
  clock?: Clock;
}): () => Promise<string> {
  const discover = oauthClientConfiguration(options);
  let cached: { token: string; expiresAt: number } | undefined;
  let inflight: Promise<string> | undefined;
  const margin = (options.refreshBeforeSeconds ?? 30) * 1000;

  return async () => {
    if (cached && cached.expiresAt - margin > nowMs(options.clock)) return cached.token;
    inflight ??= (async () => {
      try {
        const response = await oidc
          .clientCredentialsGrant(await discover(), {
            resource: options.resource,
            ...(options.scope ? { scope: options.scope } : {}),
          })
          .catch((error: unknown) => {
            // Not the IdP's refusal: its endpoint may have moved (oauth-client-configuration.ts).
            if (!(error instanceof oidc.ResponseBodyError)) discover.invalidate();
            throw error;
          });
        cached = {
          token: response.access_token,
          expiresAt: nowMs(options.clock) + (response.expires_in ?? 60) * 1000,
        };
        return cached.token;
      } finally {
        inflight = undefined;
      }
    })();
    return inflight;
  };
}
