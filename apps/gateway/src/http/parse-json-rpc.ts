import express, { type NextFunction, type Request, type Response } from 'express';
import { RPC, sendRpcError } from './json-rpc-error.ts';
import { hasUnstorableText } from './storable-text.ts';

/**
 * Deepest JSON nesting accepted in a message. The SDKs walk messages recursively (schema
 * validation, re-serialisation), and a body of a few thousand nested arrays — a few KB, far
 * under the size limit — overflowed the stack there and came back as a 500. Real MCP
 * messages nest a handful of levels; tool arguments rarely reach twenty.
 */
export const MAX_JSON_DEPTH = 128;

/**
 * Body parsing for /mcp with protocol-correct failures: wrong media type → 415, over the
 * limit → 413, unparseable → -32700, not a JSON-RPC message or nested deeper than
 * MAX_JSON_DEPTH → -32600. Nothing reaches the SDKs that they would answer with a 500.
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
      if (exceedsDepth(req.body, MAX_JSON_DEPTH)) {
        sendRpcError(
          res,
          400,
          RPC.invalidRequest,
          `Invalid Request: JSON nested deeper than ${MAX_JSON_DEPTH} levels`,
        );
        return;
      }
      const messages: unknown[] = Array.isArray(req.body) ? req.body : [req.body];
      if (messages.length === 0 || !messages.every(isJsonRpcMessage)) {
        sendRpcError(res, 400, RPC.invalidRequest, 'Invalid Request: not a JSON-RPC 2.0 message');
        return;
      }
      const batchRefusal = Array.isArray(req.body) ? whyNoBatch(req) : undefined;
      if (batchRefusal) {
        sendRpcError(res, 400, RPC.invalidRequest, `Invalid Request: ${batchRefusal}`);
        return;
      }
      if (hasUnstorableText(req.body)) {
        // Valid JSON, but not text PostgreSQL (or most downstream systems) can store: refuse
        // it as invalid params rather than fail deep inside with a database error.
        const id = (req.body as { id?: string | number }).id ?? null;
        sendRpcError(
          res,
          400,
          RPC.invalidParams,
          'Invalid params: strings must be valid Unicode without U+0000 or unpaired surrogates',
          id,
        );
        return;
      }
      next();
    },
  ];
}

/** Iterative, so that measuring a hostile body cannot overflow the stack itself. */
function exceedsDepth(value: unknown, maxDepth: number): boolean {
  const stack: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }];
  while (stack.length > 0) {
    const { value: current, depth } = stack.pop()!;
    if (typeof current !== 'object' || current === null) continue;
    if (depth + 1 > maxDepth) return true;
    for (const child of Array.isArray(current) ? current : Object.values(current)) {
      if (typeof child === 'object' && child !== null)
        stack.push({ value: child, depth: depth + 1 });
    }
  }
  return false;
}

/** The one revision whose transport has JSON-RPC batches (2025-06-18 removed them). */
const BATCH_REVISION = '2025-03-26';
const ENVELOPE_VERSION = 'io.modelcontextprotocol/protocolVersion';

/**
 * Why a batch is refused, or undefined for one 2025-03-26 allows. Its revision is the
 * MCP-Protocol-Version header, or 2025-03-26 when there is none (as the transport spec says
 * a server should assume); a 2026-07-28 envelope in any element also names its revision.
 * `initialize` may never be batched. An admitted batch is answered element by element: each
 * passes the scope check, the task service's authorization, rate limits and audit on its own.
 */
function whyNoBatch(req: Request): string | undefined {
  const header = req.headers['mcp-protocol-version'];
  const versions = new Set<string>([typeof header === 'string' ? header : BATCH_REVISION]);
  for (const m of req.body as Array<{ method?: unknown; params?: { _meta?: unknown } }>) {
    if (m.method === 'initialize') return 'initialize must not be part of a JSON-RPC batch';
    const meta = m.params?._meta;
    if (meta && typeof meta === 'object' && ENVELOPE_VERSION in meta)
      versions.add(String((meta as Record<string, unknown>)[ENVELOPE_VERSION]));
  }
  for (const v of versions) {
    if (v === BATCH_REVISION) continue;
    const named = /^\d{4}-\d{2}-\d{2}$/.test(v) ? `MCP ${v}` : 'this protocol version';
    return `JSON-RPC batches are not part of ${named} (removed in 2025-06-18); send one message per request`;
  }
  return undefined;
}

function isJsonRpcMessage(m: unknown): boolean {
  if (!m || typeof m !== 'object' || Array.isArray(m)) return false;
  const msg = m as Record<string, unknown>;
  if (msg.jsonrpc !== '2.0') return false;
  const idOk =
    !('id' in msg) ||
    typeof msg.id === 'string' ||
    (typeof msg.id === 'number' && Number.isFinite(msg.id));
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
