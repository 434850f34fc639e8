import { createKeySource, type KeySource } from '@mtg/identity';

/**
 * The keys SETs are verified with. When the transmitter is the authorization server and no
 * JWKS is configured for it, its key source is shared (one set of keys, one refresh loop);
 * otherwise the transmitter gets its own, refreshed in the background like the issuer's.
 */
export async function transmitterKeySource(options: {
  transmitterIssuer: string;
  /** SSF_JWKS_URI; else discovered from the transmitter's metadata. */
  jwksUri?: string;
  authIssuer: string;
  authKeys: KeySource;
  discoverJwksUri: (issuer: string) => Promise<string>;
  onError: (error: Error) => void;
}): Promise<KeySource> {
  if (!options.jwksUri && options.transmitterIssuer === options.authIssuer) return options.authKeys;
  const jwksUri = options.jwksUri ?? (await options.discoverJwksUri(options.transmitterIssuer));
  const keys = createKeySource({ jwksUri, onError: options.onError });
  await keys.start();
  return keys;
}
