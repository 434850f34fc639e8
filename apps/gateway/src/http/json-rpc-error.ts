import type { Response } from 'express';

/** JSON-RPC 2.0 error codes used at the HTTP boundary. */
export const RPC = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
} as const;

/** Answers with a JSON-RPC error object (id null: the request could not be read). */
export function sendRpcError(
  res: Response,
  status: number,
  code: number,
  message: string,
  id: string | number | null = null,
): void {
  res.status(status).json({ jsonrpc: '2.0', id, error: { code, message } });
}

/**
 * PostgreSQL could not be reached while handling the request: 503 with Retry-After and a
 * JSON-RPC error carrying the same hint, never a 500 with the driver's message.
 */
/** How long a client should wait before retrying when PostgreSQL cannot be reached. */
export const UNAVAILABLE_RETRY_SECONDS = 5;

export function sendUnavailable(
  res: Response,
  retryAfterSeconds = UNAVAILABLE_RETRY_SECONDS,
): void {
  res
    .status(503)
    .set('Retry-After', String(retryAfterSeconds))
    .json({
      jsonrpc: '2.0',
      id: null,
      error: {
        code: -32000,
        message: `Temporarily unavailable: the database cannot be reached; retry after ${retryAfterSeconds}s`,
        data: { reason: 'unavailable', retryAfterSeconds },
      },
    });
}
