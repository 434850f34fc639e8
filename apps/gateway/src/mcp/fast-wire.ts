import type { Request, Response } from 'express';

/** What the gateway's fast paths share: request checks and the JSON-RPC answer. */
export type Obj = Record<string, unknown>;
export const isObj = (v: unknown): v is Obj =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A JSON-RPC request id the SDKs accept: a string or a safe integer. */
export const validId = (id: unknown): id is string | number =>
  typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id));

const CORE_REVISION = '2025-11-25';

/**
 * A 2025-11-25 request as the v1 SDK's client sends it to a stateless server after
 * `initialize` (no session id, no 2026 headers), which the v1 transport would take as it
 * stands: Accept listing both JSON and SSE, a JSON body.
 */
export function coreStateless(req: Request): boolean {
  const h = req.headers;
  const accept = String(h.accept ?? '');
  return (
    h['mcp-protocol-version'] === CORE_REVISION &&
    h['mcp-session-id'] === undefined &&
    h['mcp-method'] === undefined &&
    accept.includes('application/json') &&
    accept.includes('text/event-stream') &&
    /^application\/json\s*(;|$)/i.test(String(h['content-type'] ?? ''))
  );
}

/** A fast path's answer to one request: its result or its JSON-RPC error. */
export type FastAnswer = { id: string | number } & ({ result: Obj } | { error: Obj });

/** The JSON-RPC answer, as the SDKs' servers send it: HTTP 200 either way. */
export function sendAnswer(res: Response, answer: FastAnswer) {
  const message =
    'result' in answer
      ? { result: answer.result, jsonrpc: '2.0', id: answer.id }
      : { jsonrpc: '2.0', id: answer.id, error: answer.error };
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(message));
}
