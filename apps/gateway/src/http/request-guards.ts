import type { NextFunction, Request, Response } from 'express';
import { RPC, sendRpcError } from './json-rpc-error.ts';

/** Told of each refusal, to audit and count it (reason: `host_not_allowed`, `origin_not_allowed`). */
export type OnGuardDenied = (
  res: Response,
  reason: 'host_not_allowed' | 'origin_not_allowed',
) => void;
/** RFC 9110 Host: a reg-name, IPv4 or bracketed IPv6 literal, and an optional port. */
const HOST_HEADER = /^(?:\[[0-9a-f:.]+\]|[a-z0-9._~-]+)(?::\d{1,5})?$/i;

/**
 * DNS-rebinding defence: the Host header's hostname must be one we serve. Port-agnostic,
 * as in the MCP SDK's guard.
 */
export function validateHost(allowedHostnames: string[], onDenied?: OnGuardDenied) {
  const allowed = new Set(allowedHostnames.map((h) => h.toLowerCase()));
  return (req: Request, res: Response, next: NextFunction) => {
    const host = req.headers.host;
    let hostname: string | undefined;
    try {
      // Only host[:port]: a Host with userinfo, a path or a query (`evil@127.0.0.1`) is
      // refused here, not parsed into a URL that later code cannot build a request from.
      hostname =
        host && HOST_HEADER.test(host)
          ? new URL(`http://${host}`).hostname.toLowerCase()
          : undefined;
    } catch {
      hostname = undefined;
    }
    if (!hostname || !allowed.has(hostname)) {
      onDenied?.(res, 'host_not_allowed');
      sendRpcError(res, 403, RPC.invalidRequest, 'Forbidden: Host header not allowed');
      return;
    }
    next();
  };
}

/**
 * Browser-origin check required by the Streamable HTTP transport: requests without Origin
 * (non-browser clients) pass; a present Origin must be on the allow-list: an exact origin,
 * `scheme://host:*` for that scheme and host on any port, or "*" to allow all (not
 * recommended). Origins are compared as URLs (scheme, hostname, port), so
 * `http://localhost.evil.example` or `http://localhost@evil.example` never match `localhost`.
 */
export function validateOrigin(allowedOrigins: string[], onDenied?: OnGuardDenied) {
  const allowAll = allowedOrigins.includes('*');
  const exact = new Set<string>();
  const anyPort = new Set<string>();
  for (const entry of allowedOrigins) {
    const o = entry.toLowerCase().replace(/\/$/, '');
    if (o.endsWith(':*')) anyPort.add(o.slice(0, -2));
    else exact.add(o);
  }
  const admitted = (origin: string): boolean => {
    if (exact.has(origin.toLowerCase())) return true;
    let url: URL;
    try {
      url = new URL(origin);
    } catch {
      return false;
    }
    // An origin is scheme://host[:port] and nothing else.
    if (url.origin === 'null' || url.origin !== origin.toLowerCase()) return false;
    return anyPort.has(`${url.protocol}//${url.hostname}`);
  };
  return (req: Request, res: Response, next: NextFunction) => {
    const origin = req.headers.origin;
    if (origin === undefined || allowAll || admitted(origin)) {
      next();
      return;
    }
    onDenied?.(res, 'origin_not_allowed');
    sendRpcError(res, 403, RPC.invalidRequest, 'Forbidden: Origin not allowed');
  };
}
