/**
 * Finds the issuer's jwks_uri from its metadata (OpenID discovery, then RFC 8414), checking
 * that the metadata names the same issuer. Throws when neither document answers.
 */
export async function discoverJwksUri(
  issuer: string,
  fetchImpl: typeof fetch = fetch,
): Promise<string> {
  const base = issuer.replace(/\/$/, '');
  const u = new URL(issuer);
  const candidates = [
    `${base}/.well-known/openid-configuration`,
    `${u.origin}/.well-known/oauth-authorization-server${u.pathname === '/' ? '' : u.pathname}`,
  ];
  let lastError: unknown;
  for (const href of candidates) {
    try {
      const response = await fetchImpl(href, { signal: AbortSignal.timeout(5000) });
      if (!response.ok) throw new Error(`${href} answered ${response.status}`);
      const metadata = (await response.json()) as { issuer?: string; jwks_uri?: string };
      if (metadata.issuer !== issuer) {
        throw new Error(`${href} names issuer ${metadata.issuer}, expected ${issuer}`);
      }
      if (!metadata.jwks_uri) throw new Error(`${href} has no jwks_uri`);
      return metadata.jwks_uri;
    } catch (error) {
      lastError = error;
    }
  }
  throw new Error(`cannot discover jwks_uri for ${issuer}`, { cause: lastError });
}

/** Where a waiting or failing discovery is reported (a process logger). */
export interface DiscoveryLog {
  warn(message: string, meta: Record<string, unknown>): void;
}

/**
 * discoverJwksUri, tried once a second up to `attempts` times while the authorization server
 * comes up (a gateway or router started with it); each failed attempt is logged.
 */
export async function discoverJwksUriPatiently(
  issuer: string,
  log: DiscoveryLog,
  attempts = 30,
): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await discoverJwksUri(issuer);
    } catch (error) {
      if (attempt >= attempts) throw error;
      log.warn('authorization server metadata not reachable yet', {
        issuer,
        attempt,
        error: error instanceof Error ? error.message : String(error),
      });
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}
