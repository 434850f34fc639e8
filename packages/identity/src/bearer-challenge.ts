export type BearerErrorCode = 'invalid_request' | 'invalid_token' | 'insufficient_scope';

export type BearerChallengeOptions = {
  /** RFC 9728 §5.1: where the client finds this resource's metadata. */
  resourceMetadataUrl: string;
  realm?: string;
  /**
   * Leave out when the request had no credentials at all, or only in a scheme we do not
   * support: RFC 6750 §3.1 then wants no error code and no other error information, so
   * `description` is ignored without an `error`.
   */
  error?: BearerErrorCode;
  description?: string;
  /** Scopes the request needs (RFC 6750 §3); for insufficient_scope, the ones to ask for. */
  scope?: string[];
};

/**
 * The `WWW-Authenticate` value for a 401/403 (RFC 6750 §3, RFC 9728 §5.1), e.g.
 * `Bearer error="invalid_token", error_description="the token has expired",
 * resource_metadata="https://gw.example/.well-known/oauth-protected-resource/mcp"`.
 */
export function bearerChallenge(options: BearerChallengeOptions): string {
  const params: string[] = [];
  if (options.realm !== undefined) params.push(`realm=${quoted(options.realm, 'realm')}`);
  if (options.error !== undefined) {
    params.push(`error="${options.error}"`);
    if (options.description) {
      params.push(`error_description="${descriptionText(options.description)}"`);
    }
  }
  if (options.scope?.length) {
    for (const scope of options.scope) {
      // RFC 6749 §3.3 scope-token: %x21 / %x23-5B / %x5D-7E
      if (!/^[\x21\x23-\x5B\x5D-\x7E]+$/.test(scope)) {
        throw new TypeError(`not a valid scope token: ${JSON.stringify(scope)}`);
      }
    }
    params.push(`scope="${options.scope.join(' ')}"`);
  }
  params.push(`resource_metadata=${quoted(options.resourceMetadataUrl, 'resourceMetadataUrl')}`);
  return `Bearer ${params.join(', ')}`;
}

/** RFC 9110 quoted-string. Values come from configuration; a control character is a bug. */
function quoted(value: string, name: string): string {
  if (/[^\t\x20-\x7E]/.test(value)) {
    throw new TypeError(`${name} must be printable ASCII`);
  }
  return `"${value.replace(/[\\"]/g, '\\$&')}"`;
}

/**
 * RFC 6750 §3: error_description is %x20-21 / %x23-5B / %x5D-7E, no quote or backslash even
 * escaped. Descriptions quote claim names, so quotes become apostrophes; anything else
 * outside the set becomes "?" rather than failing the response.
 */
function descriptionText(text: string): string {
  return text.replace(/"/g, "'").replace(/[^\x20\x21\x23-\x5B\x5D-\x7E]/g, '?');
}
