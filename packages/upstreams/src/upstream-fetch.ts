import { UpstreamError } from './upstream-error.ts';

export interface UpstreamFetchOptions {
  upstream: string;
  /** The current token for the upstream's audience (exchanged, never the caller's own). */
  token: () => Promise<string>;
  /** A fresh token after a 401: asked once per request. */
  reauthenticate: () => Promise<string>;
  maxResponseBytes: number;
  /** Told when an answer is refused mid-body, so the waiting request can say why. */
  onFault: (error: UpstreamError) => void;
  fetch?: typeof fetch;
}

/**
 * The fetch the MCP client transport uses towards one upstream: adds the bearer token, answers
 * a 401 with one re-exchange, turns transport failures into UpstreamErrors, and caps the
 * size of every answer (a streamed body is cut off at the cap).
 */
export function upstreamFetch(options: UpstreamFetchOptions): typeof fetch {
  const base = options.fetch ?? fetch;
  const send = async (
    input: string | URL | Request,
    init: RequestInit | undefined,
    token: string,
  ) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${token}`);
    try {
      return await base(input, { ...init, headers });
    } catch (error) {
      if ((init?.signal as AbortSignal | undefined)?.aborted) throw error;
      throw new UpstreamError(
        'upstream_unreachable',
        options.upstream,
        `upstream ${options.upstream} is unreachable: ${messageOf(error)}`,
        { cause: error },
      );
    }
  };
  return async (input: string | URL | Request, init?: RequestInit) => {
    let response = await send(input, init, await options.token());
    if (response.status === 401) {
      await response.body?.cancel().catch(() => {});
      response = await send(input, init, await options.reauthenticate());
      if (response.status === 401) {
        await response.body?.cancel().catch(() => {});
        throw new UpstreamError(
          'upstream_unauthorized',
          options.upstream,
          `upstream ${options.upstream} refused the exchanged token (401) twice`,
          { status: 401 },
        );
      }
    }
    if (response.status === 403) {
      const text = await response.text().catch(() => '');
      throw new UpstreamError(
        'upstream_forbidden',
        options.upstream,
        `upstream ${options.upstream} refused the call (403)${text ? `: ${text.slice(0, 200)}` : ''}`,
        { status: 403 },
      );
    }
    if (response.status >= 500) {
      await response.body?.cancel().catch(() => {});
      throw new UpstreamError(
        'upstream_server_error',
        options.upstream,
        `upstream ${options.upstream} answered HTTP ${response.status}`,
        { status: response.status },
      );
    }
    return capBody(response, options);
  };
}

function capBody(response: Response, options: UpstreamFetchOptions): Response {
  const tooLarge = () =>
    new UpstreamError(
      'upstream_response_too_large',
      options.upstream,
      `upstream ${options.upstream} sent an answer larger than ${options.maxResponseBytes} bytes`,
    );
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > options.maxResponseBytes) {
    void response.body?.cancel().catch(() => {});
    const error = tooLarge();
    options.onFault(error);
    throw error;
  }
  if (!response.body) return response;
  let seen = 0;
  const counted = response.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        seen += chunk.byteLength;
        if (seen > options.maxResponseBytes) {
          const error = tooLarge();
          options.onFault(error);
          controller.error(error);
          return;
        }
        controller.enqueue(chunk);
      },
    }),
  );
  return new Response(counted, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

function messageOf(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
  if (cause && typeof cause.code === 'string') return cause.code;
  return error instanceof Error ? error.message : String(error);
}
