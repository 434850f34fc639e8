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
