import type { Request, Response } from 'express';
import { TASKS_EXTENSION } from './modern-server.ts';

/** What the gateway's fast paths share: request checks and the JSON-RPC answer. */
export type Obj = Record<string, unknown>;
export const isObj = (v: unknown): v is Obj =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A `_meta` holding a progress token (a string or a safe integer) and nothing else: what the
 * v1 client adds to a request it wants progress for.
 */
export function progressTokenAlone(meta: unknown): meta is Obj {
  if (!isObj(meta) || Object.keys(meta).some((k) => k !== 'progressToken')) return false;
  return validId(meta.progressToken);
}

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

const MODERN_REVISION = '2026-07-28';

/**
 * Whether a 2026-07-28 request is framed exactly as a conforming client frames it: its
 * `_meta` envelope names the revision and declares the tasks extension, and the
 * MCP-Protocol-Version / Mcp-Method / Mcp-Name headers agree with the body (`name`: the tool
 * of a tools/call, the task of a tasks/* request), with JSON accepted.
 */
export function modernFraming(req: Request, meta: unknown, method: string, name: string) {
  if (!isObj(meta) || meta['io.modelcontextprotocol/protocolVersion'] !== MODERN_REVISION)
    return false;
  const caps = meta['io.modelcontextprotocol/clientCapabilities'];
  if (!isObj(caps) || !isObj(caps.extensions) || !isObj(caps.extensions[TASKS_EXTENSION]))
    return false;
  const h = req.headers;
  return (
    h['mcp-protocol-version'] === MODERN_REVISION &&
    h['mcp-method'] === method &&
    h['mcp-name'] === name &&
    /\bapplication\/json\b/.test(String(h.accept ?? ''))
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
