import { timingSafeEqual } from 'node:crypto';

/**
 * Who may read /metrics. With a token configured: a request presenting it as a bearer token,
 * from anywhere. Without one: loopback callers only (a scraper on the same host or pod).
 * Metrics carry no tenant, subject or token, but do reveal load and failure rates.
 */
export function scrapeAllowed(
  request: { authorization?: string | undefined; remoteAddress?: string | undefined },
  token?: string,
): boolean {
  if (token) {
    const presented = /^Bearer (.+)$/i.exec(request.authorization ?? '')?.[1] ?? '';
    const a = Buffer.from(presented);
    const b = Buffer.from(token);
    return a.length === b.length && timingSafeEqual(a, b);
  }
  return isLoopback(request.remoteAddress);
}

function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}
