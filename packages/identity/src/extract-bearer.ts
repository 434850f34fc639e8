export type ExtractBearerResult =
  { ok: true; token: string } | { ok: false; code: 'missing' | 'malformed' };

// RFC 6750 §2.1: credentials = "Bearer" 1*SP b64token; the scheme is case-insensitive.
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*)$/i;

/**
 * The token from an `Authorization` header. `missing` when there is no header or it uses
 * another scheme (RFC 6750 §3.1 treats an unsupported method like no credentials: the
 * challenge then carries no error); `malformed` for a Bearer header that is not exactly one
 * token, and for more than one Authorization header.
 */
export function extractBearer(header: string | string[] | undefined): ExtractBearerResult {
  if (Array.isArray(header)) {
    if (header.length > 1) return { ok: false, code: 'malformed' };
    header = header[0];
  }
  const value = header?.trim();
  if (!value) return { ok: false, code: 'missing' };
  const scheme = /^\S+/.exec(value)![0];
  if (scheme.toLowerCase() !== 'bearer') return { ok: false, code: 'missing' };
  const match = BEARER.exec(value);
  return match ? { ok: true, token: match[1]! } : { ok: false, code: 'malformed' };
}
