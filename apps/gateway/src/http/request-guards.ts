import type { NextFunction, Request, Response } from 'express';
import { RPC, sendRpcError } from './json-rpc-error.ts';

/** Told of each refusal, to audit and count it (reason: `host_not_allowed`, `origin_not_allowed`). */
export type OnGuardDenied = (
  res: Response,
  reason: 'host_not_allowed' | 'origin_not_allowed',
) => void;

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
      hostname = host ? new URL(`http://${host}`).hostname.toLowerCase() : undefined;
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
 * (non-browser clients) pass; a present Origin must be on the allow-list (exact origin, or
 * "*" to allow all — not recommended).
 */
export function validateOrigin(allowedOrigins: string[], onDenied?: OnGuardDenied) {
  const allowAll = allowedOrigins.includes('*');
  const allowed = new Set(allowedOrigins.map((o) => o.toLowerCase().replace(/\/$/, '')));
  return (req: Request, res: Response, next: NextFunction) => {
    const origin = req.headers.origin;
    if (origin === undefined || allowAll || allowed.has(origin.toLowerCase())) {
      next();
      return;
    }
    onDenied?.(res, 'origin_not_allowed');
    sendRpcError(res, 403, RPC.invalidRequest, 'Forbidden: Origin not allowed');
  };
}
