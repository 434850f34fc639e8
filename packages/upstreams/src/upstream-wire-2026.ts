import { createParser } from 'eventsource-parser';
import { UpstreamError, isUpstreamError } from './upstream-error.ts';
import { upstreamFetch } from './upstream-fetch.ts';

/** The 2026-07-28 revision and its tasks extension, as an upstream offers them. */
export const REVISION_2026 = '2026-07-28';
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

export interface Wire2026Options {
  upstream: string;
  url: string;
  token: () => Promise<string>;
  reauthenticate: () => Promise<string>;
  maxResponseBytes: number;
  fetch?: typeof fetch;
}

/**
 * Requests on the 2026-07-28 wire: stateless, each one framed as the v2 client frames it
 * (the per-request `_meta` envelope declaring the tasks extension, MCP-Protocol-Version /
 * Mcp-Method / Mcp-Name headers), through the same fetch as every upstream request (the
 * exchanged token, one re-exchange after a 401, the size cap). The v2 client refuses task
 * replies, so the extension is spoken here; failures are UpstreamErrors with the usual codes.
 */
export function wire2026(options: Wire2026Options) {
  let fault: UpstreamError | undefined;
  const send = upstreamFetch({
    upstream: options.upstream,
    token: options.token,
    reauthenticate: options.reauthenticate,
    maxResponseBytes: options.maxResponseBytes,
    onFault: (e) => (fault = e),
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
  let nextId = 1;

  const request = async (
    method: string,
    params: Record<string, unknown>,
    o: { signal?: AbortSignal; timeoutMs: number },
  ): Promise<Record<string, unknown>> => {
    const id = nextId++;
    const name = method === 'tools/call' ? params.name : params.taskId;
    const bound = AbortSignal.timeout(o.timeoutMs);
    const signal = o.signal ? AbortSignal.any([o.signal, bound]) : bound;
    fault = undefined;
    try {
      const response = await send(options.url, {
        method: 'POST',
        signal,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': REVISION_2026,
          'mcp-method': method,
          ...(typeof name === 'string' ? { 'mcp-name': name } : {}),
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id,
          method,
          params: {
            ...params,
            _meta: {
              ...(params._meta as object | undefined),
              'io.modelcontextprotocol/protocolVersion': REVISION_2026,
              'io.modelcontextprotocol/clientInfo': { name: 'mcp-task-gateway', version: '0.1.0' },
              'io.modelcontextprotocol/clientCapabilities': {
                extensions: { [TASKS_EXTENSION]: {} },
              },
            },
          },
        }),
      });
      const text = await response.text();
      const message = responseOf(text, response.headers.get('content-type') ?? '', id);
      if (!message) {
        throw new UpstreamError(
          response.ok ? 'upstream_protocol_error' : 'upstream_refused',
          options.upstream,
          response.ok
            ? `upstream ${options.upstream} sent something that is not MCP JSON-RPC`
            : `upstream ${options.upstream} answered HTTP ${response.status}`,
          { status: response.status },
        );
      }
      if (message.error) {
        const e = message.error as { code?: unknown; message?: string };
        throw new UpstreamError(
          'upstream_refused',
          options.upstream,
          `upstream ${options.upstream} answered with JSON-RPC error ${String(e.code)}: ${String(e.message ?? '').slice(0, 300)}`,
          typeof e.code === 'number' ? { status: e.code } : {},
        );
      }
      const result = message.result;
      if (!result || typeof result !== 'object' || Array.isArray(result)) {
        throw new UpstreamError(
          'upstream_protocol_error',
          options.upstream,
          `upstream ${options.upstream} answered ${method} without a result object`,
        );
      }
      return result as Record<string, unknown>;
    } catch (error) {
      if (o.signal?.aborted) throw o.signal.reason;
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- an UpstreamError set by onFault; TypeScript narrows it to never after `fault = undefined`, not seeing the callback
      if (fault) throw fault;
      if (isUpstreamError(error)) throw error;
      if (bound.aborted || (error as { name?: string } | null)?.name === 'TimeoutError') {
        throw new UpstreamError(
          'upstream_timeout',
          options.upstream,
          `upstream ${options.upstream} did not answer in time`,
          { cause: error },
        );
      }
      throw new UpstreamError(
        'upstream_protocol_error',
        options.upstream,
        `upstream ${options.upstream}: ${error instanceof Error ? error.message.slice(0, 300) : String(error)}`,
        { cause: error },
      );
    }
  };

  return {
    request,
    /**
     * Whether the upstream serves the 2026-07-28 tasks extension (`server/discover`). An
     * upstream of an earlier era refuses the request (it knows only `initialize`): false. An
     * unreachable or failing upstream is an error, so a task waits instead of picking a wire.
     */
    async offersTasks(o: { signal?: AbortSignal; timeoutMs: number }): Promise<boolean> {
      try {
        const found = await request('server/discover', {}, o);
        const versions = Array.isArray(found.supportedVersions) ? found.supportedVersions : [];
        const extensions = (found.capabilities as { extensions?: Record<string, unknown> })
          ?.extensions;
        return versions.includes(REVISION_2026) && extensions?.[TASKS_EXTENSION] !== undefined;
      } catch (error) {
        if (
          isUpstreamError(error) &&
          (error.code === 'upstream_refused' || error.code === 'upstream_protocol_error')
        )
          return false;
        throw error;
      }
    },
  };
}

/** The JSON-RPC response with `id` in a JSON body or an SSE stream; undefined when none. */
function responseOf(
  text: string,
  contentType: string,
  id: number,
): { result?: unknown; error?: unknown } | undefined {
  const parse = (s: string) => {
    try {
      return JSON.parse(s) as Record<string, unknown>;
    } catch {
      return undefined;
    }
  };
  const candidates: unknown[] = [];
  if (contentType.includes('text/event-stream')) {
    // The whole stream was read (the size cap applies): each event's data is one message.
    // The parser holds a final CR until it knows whether LF follows; the stream has ended,
    // so an LF settles it. An event the stream cut off before its blank line is dropped, as
    // the EventSource spec (and the SDK's own client) drops it.
    const parser = createParser({ onEvent: (event) => candidates.push(parse(event.data)) });
    parser.feed(text);
    parser.feed('\n');
  } else {
    const body = parse(text);
    candidates.push(...(Array.isArray(body) ? body : [body]));
  }
  for (const c of candidates) {
    const m = c as { jsonrpc?: unknown; id?: unknown; result?: unknown; error?: unknown } | null;
    if (m && m.jsonrpc === '2.0' && m.id === id && ('result' in m || 'error' in m)) return m;
  }
  return undefined;
}
