import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  ElicitRequestSchema,
  McpError,
  type Notification,
} from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { isUpstreamError, UpstreamError } from './upstream-error.ts';
import { upstreamFetch } from './upstream-fetch.ts';

const anyResult = z.looseObject({});

export interface UpstreamProgress {
  progress: number;
  total?: number;
  message?: string;
}

export interface RequestOptions {
  signal?: AbortSignal;
  timeoutMs: number;
  /** Asks for progress notifications; each resets the timeout. */
  onProgress?: (p: UpstreamProgress) => void;
}

/** One MCP session with one upstream. */
export interface UpstreamConnection {
  readonly sessionId: string | undefined;
  readonly protocolVersion: string | undefined;
  request(
    method: string,
    params: Record<string, unknown>,
    options: RequestOptions,
  ): Promise<Record<string, unknown>>;
  /**
   * Sends the upstream a JSON-RPC response to a request it made (an elicitation), as a POST
   * on this session: the answer needs no open stream, so a later run (another worker) can
   * send it on the resumed session.
   */
  respond(id: string | number, result: Record<string, unknown>): Promise<void>;
  /** Stops using the session here; `terminate` also asks the upstream to end it. */
  close(options?: { terminate?: boolean }): Promise<void>;
}

export interface ConnectOptions {
  upstream: string;
  url: string;
  token: () => Promise<string>;
  reauthenticate: () => Promise<string>;
  maxResponseBytes: number;
  timeoutMs: number;
  /** Resume a journaled session instead of initializing a new one. */
  resume?: { sessionId: string; protocolVersion?: string };
  onNotification?: (notification: Notification) => void;
  /** Any trouble of the session's transport, such as its notification stream ending. */
  onTransportError?: (error: Error) => void;
  /**
   * Open the session's standalone GET stream for the upstream's own messages (default: yes).
   * A session that only sends requests (a pooled instant-call session) has no use for one,
   * and each would hold a connection to the upstream.
   */
  listen?: boolean;
  /**
   * Declares form-mode elicitation and hands each `elicitation/create` the upstream sends
   * (on a tasks/result stream) here, with its JSON-RPC id. It is never answered by this
   * connection: the answer is a person's, sent later with `respond` (perhaps by another
   * worker), so the request stays open on the upstream meanwhile.
   */
  onElicitation?: (request: { id: string | number; params: Record<string, unknown> }) => void;
  signal?: AbortSignal;
  fetch?: typeof fetch;
}

/**
 * Opens (or resumes) an MCP session with an upstream over Streamable HTTP, with the SDK's
 * client. Every failure comes out as an UpstreamError with a stable code, except the caller's
 * own abort, which comes out as the signal's reason.
 */
export async function connectUpstream(options: ConnectOptions): Promise<UpstreamConnection> {
  const pending = new Set<AbortController>();
  let fault: UpstreamError | undefined;
  const onFault = (error: UpstreamError) => {
    fault ??= error;
    for (const p of pending) p.abort(error);
  };
  const send = upstreamFetch({
    upstream: options.upstream,
    token: options.token,
    reauthenticate: options.reauthenticate,
    maxResponseBytes: options.maxResponseBytes,
    onFault,
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
  const transport = new StreamableHTTPClientTransport(new URL(options.url), {
    ...(options.resume ? { sessionId: options.resume.sessionId } : {}),
    // Not listening: the GET is answered here as a server without a stream would (405), so
    // the transport carries on without one and nothing is sent.
    fetch:
      options.listen === false
        ? (input: string | URL | Request, init?: RequestInit) =>
            (init?.method ?? 'GET').toUpperCase() === 'GET'
              ? Promise.resolve(new Response(null, { status: 405 }))
              : send(input, init)
        : send,
  });
  if (options.resume?.protocolVersion) transport.setProtocolVersion(options.resume.protocolVersion);
  const client = new Client(
    { name: 'mcp-task-gateway', version: '0.1.0' },
    { capabilities: options.onElicitation ? { elicitation: { form: {} } } : {} },
  );
  if (options.onElicitation) {
    const hand = options.onElicitation;
    client.setRequestHandler(ElicitRequestSchema, (request, extra) => {
      hand({ id: extra.requestId, params: request.params });
      // Never settles: when the connection closes the SDK drops the handler without
      // answering (an error answer would end the upstream's question).
      return new Promise<never>(() => {});
    });
  }
  client.onerror = (error) => {
    options.onTransportError?.(error);
    // A body the transport could not parse is the upstream's fault; the request would
    // otherwise wait for its timeout.
    if (error instanceof SyntaxError || (error as { name?: string }).name === 'ZodError') {
      onFault(
        new UpstreamError(
          'upstream_protocol_error',
          options.upstream,
          `upstream ${options.upstream} sent something that is not MCP JSON-RPC: ${error.message.slice(0, 200)}`,
          { cause: error },
        ),
      );
    }
  };
  if (options.onNotification)
    client.fallbackNotificationHandler = async (n) => options.onNotification!(n);
  const classify = (error: unknown, signal?: AbortSignal) =>
    toUpstreamError(error, options.upstream, fault, signal, options.resume !== undefined);

  const connecting = new AbortController();
  pending.add(connecting);
  try {
    await withAbort(client.connect(transport, { timeout: options.timeoutMs }), [
      connecting.signal,
      ...(options.signal ? [options.signal] : []),
    ]);
  } catch (error) {
    await client.close().catch(() => {});
    throw classify(error, options.signal);
  } finally {
    pending.delete(connecting);
  }
  return {
    get sessionId() {
      return transport.sessionId;
    },
    get protocolVersion() {
      return transport.protocolVersion;
    },
    async request(method, params, o) {
      if (fault) throw fault;
      const local = new AbortController();
      pending.add(local);
      const signal = o.signal ? AbortSignal.any([local.signal, o.signal]) : local.signal;
      try {
        return await client.request({ method, params }, anyResult, {
          signal,
          timeout: o.timeoutMs,
          ...(o.onProgress
            ? {
                onprogress: (p: UpstreamProgress) => o.onProgress!(p),
                resetTimeoutOnProgress: true,
              }
            : {}),
        });
      } catch (error) {
        throw classify(error, o.signal);
      } finally {
        pending.delete(local);
      }
    },
    async respond(id, result) {
      if (fault) throw fault;
      try {
        await transport.send({ jsonrpc: '2.0', id, result });
      } catch (error) {
        throw classify(error);
      }
    },
    async close(c = {}) {
      if (c.terminate) await transport.terminateSession().catch(() => {});
      await client.close().catch(() => {});
    },
  };
}

function withAbort<T>(work: Promise<T>, signals: AbortSignal[]): Promise<T> {
  const signal = AbortSignal.any(signals);
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

/** One place that names what went wrong; the caller's own abort stays the caller's. */
function toUpstreamError(
  error: unknown,
  upstream: string,
  fault: UpstreamError | undefined,
  signal: AbortSignal | undefined,
  resumed: boolean,
): unknown {
  if (signal?.aborted) return signal.reason;
  if (fault) return fault;
  if (isUpstreamError(error)) return error;
  if (error instanceof McpError) {
    if (error.code === -32001) {
      return new UpstreamError(
        'upstream_timeout',
        upstream,
        `upstream ${upstream} did not answer in time`,
        {
          cause: error,
        },
      );
    }
    return new UpstreamError(
      'upstream_refused',
      upstream,
      `upstream ${upstream} answered with JSON-RPC error ${error.code}: ${error.message.replace(/^MCP error -?\d+: /, '').slice(0, 300)}`,
      { status: error.code, cause: error },
    );
  }
  if (error instanceof StreamableHTTPError) {
    const status = typeof error.code === 'number' ? error.code : undefined;
    if (status === 404 && resumed) {
      return new UpstreamError(
        'upstream_session_lost',
        upstream,
        `upstream ${upstream} no longer knows the MCP session this task was started in`,
        { status, cause: error },
      );
    }
    return new UpstreamError(
      status !== undefined && status >= 500 ? 'upstream_server_error' : 'upstream_refused',
      upstream,
      `upstream ${upstream} answered HTTP ${status ?? '?'}`,
      { ...(status !== undefined ? { status } : {}), cause: error },
    );
  }
  if (error instanceof SyntaxError || (error as { name?: string } | null)?.name === 'ZodError') {
    return new UpstreamError(
      'upstream_protocol_error',
      upstream,
      `upstream ${upstream} sent something that is not MCP JSON-RPC`,
      { cause: error },
    );
  }
  if (
    (error as { name?: string } | null)?.name === 'AbortError' ||
    (error as { name?: string } | null)?.name === 'TimeoutError'
  ) {
    return new UpstreamError(
      'upstream_timeout',
      upstream,
      `upstream ${upstream} did not answer in time`,
      {
        cause: error,
      },
    );
  }
  return new UpstreamError(
    'upstream_protocol_error',
    upstream,
    `upstream ${upstream}: ${error instanceof Error ? error.message.slice(0, 300) : String(error)}`,
    { cause: error },
  );
}
