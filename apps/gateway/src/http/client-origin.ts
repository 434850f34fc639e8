import net from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import { runWithRequestOrigin, type RequestOrigin } from '@mtg/audit';
import { clipInput } from '@mtg/log';
import { noteRequestMeta } from './request-meta.ts';

const unmapped = (address: string) =>
  address.startsWith('::ffff:') && net.isIPv4(address.slice(7)) ? address.slice(7) : address;

/**
 * The client's address: the peer's, unless the peer is one of `trustedProxies`; then
 * X-Forwarded-For is read from the right, skipping trusted proxies, and the first address
 * that is not one is the client (a client can prepend anything, so only what our own proxies
 * appended is believed). A malformed entry stops the walk at the hop that added it.
 */
export function clientAddress(
  peer: string | undefined,
  forwardedFor: readonly string[] | undefined,
  trustedProxies: ReadonlySet<string>,
): string | undefined {
  if (!peer) return undefined;
  let client = unmapped(peer);
  if (!trustedProxies.has(client) || !forwardedFor) return client;
  const hops = forwardedFor.flatMap((h) => h.split(',')).map((h) => h.trim());
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = unmapped(hops[i]!);
    if (net.isIP(hop) === 0) break;
    client = hop;
    if (!trustedProxies.has(hop)) break;
  }
  return client;
}

/**
 * Records where each request came from (its client address and user agent, request-meta.ts) for
 * the request log, and runs the rest of its handling with that origin, so every
 * `auth.denied` and `task.denied` it causes names it (packages/audit request-origin.ts).
 */
export function recordClientOrigin(trustedProxies: readonly string[]) {
  const trusted = new Set(trustedProxies.map(unmapped));
  return (req: Request, res: Response, next: NextFunction) => {
    const ua = req.headers['user-agent'];
    const origin: RequestOrigin = {};
    const ip = clientAddress(
      req.socket.remoteAddress,
      req.headersDistinct['x-forwarded-for'],
      trusted,
    );
    if (ip) origin.ip = ip;
    if (typeof ua === 'string' && ua) origin.userAgent = clipInput(ua);
    noteRequestMeta(res, { clientIp: origin.ip, userAgent: origin.userAgent });
    runWithRequestOrigin(origin, next);
  };
}
