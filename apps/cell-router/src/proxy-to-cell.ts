import http from 'node:http';
import https from 'node:https';
import type { Request, Response } from 'express';
import type { Logger } from '@mtg/log';
import { sendRpcError, sendUnavailable } from './answers.ts';
import type { Cell } from './cells-file.ts';
import { correlationIdOf } from './request-route.ts';

// RFC 9110 §7.6.1: meant for one connection, never forwarded.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * Headers a cell may believe from a proxy it trusts (TRUSTED_PROXIES): a client's own must
 * never arrive looking as if the router had set it.
 */
const SET_BY_PROXIES_ONLY = ['x-forwarded-client-cert'];

function forwardable(headers: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const named = String(headers.connection ?? '')
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter(Boolean);
  const out: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || named.includes(name)) continue;
    if (SET_BY_PROXIES_ONLY.includes(name)) continue;
    out[name] = value;
  }
  return out;
}

export interface ProxyOptions {
  logger: Logger;
  /** Request bodies larger than this get 413 without reaching the cell. */
  maxBodyBytes: number;
  connectTimeoutMs: number;
  /** Keep-alive connections to the cells. */
  agents?: { http: http.Agent; https: https.Agent };
}

export function cellAgents() {
  return {
    http: new http.Agent({ keepAlive: true, maxSockets: 1024 }),
    https: new https.Agent({ keepAlive: true, maxSockets: 1024 }),
  };
}

/**
 * Relays one request to `cell` and its answer back, as it arrives: headers at once, then
 * each chunk (an SSE stream of Streamable HTTP is never buffered), in both directions, with
 * every end-to-end header (Authorization, Mcp-Session-Id, MCP-Protocol-Version,
 * Last-Event-ID, WWW-Authenticate, Retry-After…) passed unchanged. The Host header is the
 * client's (the cells' GATEWAY_RESOURCE is the router's URL, so its host is one they admit).
 * A client that goes away ends the cell's request; a cell that cannot be reached is a 503.
 */
export function proxyToCell(req: Request, res: Response, cell: Cell, options: ProxyOptions): void {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > options.maxBodyBytes) {
    req.resume();
    return sendRpcError(res, 413, 'Request body too large');
  }
  const target = new URL(cell.url + req.originalUrl);
  const secure = target.protocol === 'https:';
  const agents = options.agents;
  const headers = forwardable(req.headers);
  const peer = req.socket.remoteAddress;
  if (peer)
    headers['x-forwarded-for'] = req.headers['x-forwarded-for']
      ? `${[req.headers['x-forwarded-for']].flat().join(', ')}, ${peer}`
      : peer;
  headers['x-forwarded-proto'] = 'encrypted' in req.socket ? 'https' : 'http';
  if (req.headers.host) headers['x-forwarded-host'] = req.headers.host;

  const outgoing = (secure ? https : http).request(target, {
    method: req.method,
    headers,
    ...(agents ? { agent: secure ? agents.https : agents.http } : {}),
  });
  // Who answers the client: nobody yet, the router itself (413, 503), or the cell.
  let answer: 'pending' | 'ours' | 'cells' = 'pending';
  const fail = (why: string, error?: Error) => {
    if (answer === 'ours') return;
    if (answer === 'cells') {
      res.destroy();
      return;
    }
    answer = 'ours';
    options.logger.warn('cell unreachable', {
      correlationId: correlationIdOf(res),
      cell: cell.name,
      why,
      ...(error ? { error: error.message } : {}),
    });
    sendUnavailable(res, 'the cell serving this tenant is unavailable, retry later');
  };

  // A bound on reaching the cell, not on the answer: a blocking tasks/result or an SSE
  // stream may rightly take minutes.
  const connectTimer = setTimeout(() => {
    outgoing.destroy(new Error('connect timeout'));
  }, options.connectTimeoutMs);
  outgoing.once('socket', (socket) => {
    if (!socket.connecting) return clearTimeout(connectTimer);
    socket.once(secure ? 'secureConnect' : 'connect', () => clearTimeout(connectTimer));
  });
  outgoing.on('error', (error) => {
    clearTimeout(connectTimer);
    fail('request failed', error);
  });

  outgoing.on('response', (incoming) => {
    clearTimeout(connectTimer);
    if (answer === 'ours') return void incoming.resume();
    answer = 'cells';
    res.status(incoming.statusCode ?? 502);
    for (const [name, value] of Object.entries(forwardable(incoming.headers)))
      if (value !== undefined) res.setHeader(name, value);
    res.flushHeaders();
    incoming.pipe(res);
    incoming.once('error', () => res.destroy());
  });

  // The client went away (a closed SSE stream, an aborted call): so does the cell's request.
  res.once('close', () => {
    clearTimeout(connectTimer);
    if (!res.writableFinished) outgoing.destroy();
  });

  let received = 0;
  req.on('data', (chunk: Buffer) => {
    received += chunk.length;
    if (received > options.maxBodyBytes) {
      req.unpipe(outgoing);
      outgoing.destroy();
      if (answer === 'pending') {
        answer = 'ours';
        sendRpcError(res.set('Connection', 'close'), 413, 'Request body too large');
      }
      req.destroy();
    }
  });
  req.pipe(outgoing);
}
