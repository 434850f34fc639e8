import express, { type NextFunction, type Request, type Response } from 'express';
import { RPC, sendRpcError } from './json-rpc-error.ts';

/**
 * Body parsing for /mcp with protocol-correct failures: wrong media type → 415, over the
 * limit → 413, unparseable → -32700, not a JSON-RPC message → -32600. Nothing reaches the
 * SDKs that they would answer with a 500.
 */
export function parseJsonRpc(limitBytes: number) {
  const json = express.json({ limit: limitBytes, type: () => true, strict: false });
  return [
    (req: Request, res: Response, next: NextFunction) => {
      if (req.method !== 'POST') return next();
      const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
      if (type !== 'application/json') {
        sendRpcError(res, 415, RPC.invalidRequest, 'Unsupported Media Type: use application/json');
        return;
      }
      json(req, res, (error?: unknown) => {
        if (!error) return next();
        const e = error as { type?: string; status?: number };
        if (e.type === 'entity.too.large') {
          sendRpcError(res, 413, RPC.invalidRequest, `Request body exceeds ${limitBytes} bytes`);
        } else if (e.type === 'encoding.unsupported' || e.type === 'charset.unsupported') {
          sendRpcError(res, 415, RPC.invalidRequest, 'Unsupported body encoding');
        } else {
          sendRpcError(res, 400, RPC.parseError, 'Parse error: body is not valid JSON');
        }
      });
    },
    (req: Request, res: Response, next: NextFunction) => {
      if (req.method !== 'POST') return next();
      const messages: unknown[] = Array.isArray(req.body) ? req.body : [req.body];
      if (messages.length === 0 || !messages.every(isJsonRpcMessage)) {
        sendRpcError(res, 400, RPC.invalidRequest, 'Invalid Request: not a JSON-RPC 2.0 message');
        return;
      }
      next();
    },
  ];
}

function isJsonRpcMessage(m: unknown): boolean {
  if (!m || typeof m !== 'object' || Array.isArray(m)) return false;
  const msg = m as Record<string, unknown>;
  if (msg.jsonrpc !== '2.0') return false;
  const idOk =
    !('id' in msg) || typeof msg.id === 'string' || (typeof msg.id === 'number' && Number.isFinite(msg.id));
  if (!idOk) return false;
  if ('method' in msg) {
    return (
      typeof msg.method === 'string' &&
      (!('params' in msg) || (typeof msg.params === 'object' && msg.params !== null))
    );
  }
  // A response posted by the client (to a server request): result or error, with an id.
  return 'id' in msg && ('result' in msg || 'error' in msg);
}
