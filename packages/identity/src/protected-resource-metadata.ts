const WELL_KNOWN = '/.well-known/oauth-protected-resource';

export type ProtectedResourceMetadataOptions = {
  /** This server's resource identifier, the audience tokens must carry (RFC 8707). */
  resource: string;
  authorizationServers: string[];
  scopesSupported: string[];
  resourceName?: string;
  /** A URL of human-readable documentation. */
  documentation?: string;
};

/** RFC 9728 §2 protected resource metadata document. */
export type ProtectedResourceMetadata = {
  resource: string;
  authorization_servers: string[];
  scopes_supported: string[];
  bearer_methods_supported: ['header'];
  resource_name?: string;
  resource_documentation?: string;
};

/** The RFC 9728 document to serve at the URLs from `metadataUrlsFor`. */
export function protectedResourceMetadata(
  options: ProtectedResourceMetadataOptions,
): ProtectedResourceMetadata {
  resourceUrl(options.resource);
  // MCP requires at least one; a client cannot find where to get a token otherwise.
  if (options.authorizationServers.length === 0) {
    throw new TypeError('protected resource metadata needs at least one authorization server');
  }
  const document: ProtectedResourceMetadata = {
    resource: options.resource,
    authorization_servers: [...options.authorizationServers],
    scopes_supported: [...options.scopesSupported],
    // Tokens in query strings or form bodies leak into logs; only the header is accepted.
    bearer_methods_supported: ['header'],
  };
  if (options.resourceName !== undefined) document.resource_name = options.resourceName;
  if (options.documentation !== undefined) document.resource_documentation = options.documentation;
  return document;
}

/**
 * RFC 9728 §3.1 metadata URLs for a resource, to serve the document at. The first is the one
 * for this resource (the suffix goes between the host and the path: `https://host/mcp` →
 * `https://host/.well-known/oauth-protected-resource/mcp`): put it in `resource_metadata`.
 * The second is the root one, which clients that skip the challenge (and older MCP clients)
 * probe; omitted when the resource has no path, as the two coincide.
 */
export function metadataUrlsFor(resource: string): string[] {
  const url = resourceUrl(resource);
  // "any terminating slash following the host component MUST be removed"
  const path = url.pathname === '/' ? '' : url.pathname;
  const forResource = `${url.origin}${WELL_KNOWN}${path}${url.search}`;
  const root = `${url.origin}${WELL_KNOWN}`;
  return forResource === root ? [root] : [forResource, root];
}

function resourceUrl(resource: string): URL {
  if (!URL.canParse(resource)) throw new TypeError('resource must be an absolute URL');
  const url = new URL(resource);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new TypeError('resource must be an http(s) URL');
  }
  // RFC 8707 §2: a resource indicator has no fragment.
  if (url.hash || resource.includes('#')) throw new TypeError('resource must not have a fragment');
  return url;
}
