import type { Response } from 'express';
import { bearerChallenge } from '@mtg/identity';

/**
 * The router's refusals, shaped as a cell's gateway shapes the same ones (apps/gateway
 * http/authenticate.ts, http/json-rpc-error.ts): a client cannot tell which of the two
 * refused it, and its OAuth discovery works from either challenge.
 */

/** 401 (no token), 400 (malformed header) or 401 `invalid_token`, naming the metadata. */
export function refuseBearer(
  res: Response,
  resourceMetadataUrl: string,
  refusal: { code: 'missing' } | { code: 'malformed' } | { code: 'invalid'; description: string },
): void {
  if (refusal.code === 'missing') {
    res
      .status(401)
      .set('WWW-Authenticate', bearerChallenge({ resourceMetadataUrl }))
      .json({ error: 'invalid_token', error_description: 'missing access token' });
    return;
  }
  if (refusal.code === 'malformed') {
    res
      .status(400)
      .set(
        'WWW-Authenticate',
        bearerChallenge({
          error: 'invalid_request',
          description: 'Authorization header must be "Bearer <token>"',
          resourceMetadataUrl,
        }),
      )
      .json({ error: 'invalid_request', error_description: 'malformed Authorization header' });
    return;
  }
  res
    .status(401)
    .set(
      'WWW-Authenticate',
      bearerChallenge({
        error: 'invalid_token',
        description: refusal.description,
        resourceMetadataUrl,
      }),
    )
    .json({ error: 'invalid_token', error_description: refusal.description });
}

/** A JSON-RPC error object at the HTTP layer (id null: the request was not read). */
export function sendRpcError(res: Response, status: number, message: string): void {
  res.status(status).json({ jsonrpc: '2.0', id: null, error: { code: -32600, message } });
}

/** Our side cannot answer now (signing keys, an unreachable cell): 503 + Retry-After. */
export function sendUnavailable(res: Response, message: string, retryAfterSeconds = 5): void {
  res
    .status(503)
    .set('Retry-After', String(retryAfterSeconds))
    .json({ jsonrpc: '2.0', id: null, error: { code: -32603, message } });
}
