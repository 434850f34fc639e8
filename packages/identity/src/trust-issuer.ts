import type { ClaimMapping } from './claim-mapping.ts';
import { createKeySource, type KeySource } from './create-key-source.ts';
import { discoverJwksUriPatiently, type DiscoveryLog } from './discover-jwks-uri.ts';
import type { VerifyAccessTokenOptions } from './verify-access-token.ts';

/** The AUTH_* settings of a resource server (the gateway, the cell router). */
export interface IssuerSettings {
  issuer: string;
  /** AUTH_JWKS_URI; discovered from the issuer's metadata when absent. */
  jwksUri?: string | undefined;
  /** The resource this server is: the audience its tokens must carry. */
  audience: string;
  algorithms: readonly string[];
  clockToleranceSec: number;
  /** AUTH_REQUIRED_TYP; empty skips the check. */
  requiredTyp?: string | undefined;
  claims: ClaimMapping;
  now?: () => number;
}

/**
 * The issuer's signing keys (discovered, fetched and refreshed in the background) and the
 * options that verify its access tokens for this resource: what a resource server needs
 * before it serves its first request.
 */
export async function trustIssuer(
  settings: IssuerSettings,
  log: DiscoveryLog,
): Promise<{ keys: KeySource; verify: VerifyAccessTokenOptions }> {
  const jwksUri = settings.jwksUri ?? (await discoverJwksUriPatiently(settings.issuer, log));
  const keys = createKeySource({
    jwksUri,
    onError: (error) => log.warn('jwks refresh failed', { error: error.message }),
  });
  await keys.start();
  return {
    keys,
    verify: {
      keys: keys.getKey,
      issuer: settings.issuer,
      audience: settings.audience,
      algorithms: settings.algorithms,
      clockToleranceSec: settings.clockToleranceSec,
      ...(settings.requiredTyp ? { requiredTyp: settings.requiredTyp as 'at+jwt' } : {}),
      claims: settings.claims,
      ...(settings.now ? { now: settings.now } : {}),
    },
  };
}
