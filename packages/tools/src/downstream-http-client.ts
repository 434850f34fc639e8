import type { DownstreamClient } from './long-tool.ts';
import { DownstreamUnreachable, type DownstreamResilience } from './downstream-resilience.ts';

/** A downstream answered with an error status; 4xx are the tool's problem, 5xx transient. */
export class DownstreamError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = 'DownstreamError';
    this.status = status;
  }
}

/**
 * HTTP client for a downstream resource server, for one task. `token` is asked before
 * every attempt, so the caller can hand out a fresh short-lived credential when the last one
 * is near expiry. Never sends the user's own token (no passthrough).
 *
 * With `resilience`, every call goes through the process's policies for `baseUrl`
 * (per-attempt timeout, retries with backoff and jitter, a shared circuit breaker; see
 * downstream-resilience.ts). Retrying writes is safe because every write carries its
 * Idempotency-Key: the downstream records a key once. Without it, one attempt bounded by
 * `timeoutMs`.
 */
export function createDownstreamClient(options: {
  baseUrl: string;
  taskId: string;
  token: () => Promise<string>;
  fetch?: typeof fetch;
  timeoutMs?: number;
  resilience?: DownstreamResilience;
}): DownstreamClient {
  const f = options.fetch ?? fetch;
  const attempt = async (
    method: string,
    path: string,
    signal: AbortSignal,
    body?: unknown,
    key?: string,
  ) => {
    const token = await options.token();
    let response: Response;
    try {
      response = await f(new URL(path, options.baseUrl), {
        method,
        signal,
        headers: {
          authorization: `Bearer ${token}`,
          'x-task-id': options.taskId,
          ...(key ? { 'idempotency-key': key } : {}),
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
    } catch (error) {
      if (signal.aborted) throw signal.reason ?? error;
      throw new DownstreamUnreachable(`${method} ${path}: ${causeOf(error)}`, error);
    }
    const text = await response.text();
    if (!response.ok)
      throw new DownstreamError(
        response.status,
        `${method} ${path} → ${response.status}: ${text.slice(0, 200)}`,
      );
    return (text ? JSON.parse(text) : {}) as Record<string, unknown>;
  };
  const call = (
    method: string,
    path: string,
    signal: AbortSignal,
    body?: unknown,
    key?: string,
  ) => {
    if (options.resilience) {
      return options.resilience.run(options.baseUrl, signal, (s) =>
        attempt(method, path, s, body, key),
      );
    }
    return attempt(
      method,
      path,
      AbortSignal.any([signal, AbortSignal.timeout(options.timeoutMs ?? 30_000)]),
      body,
      key,
    );
  };
  return {
    write: (path, body, o) => call('POST', path, o.signal, body, o.idempotencyKey),
    read: (path, o) => call('GET', path, o.signal),
  };
}

/** fetch() says "fetch failed"; the reason (ECONNREFUSED, ECONNRESET…) is in its cause. */
function causeOf(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
  if (cause && typeof cause.code === 'string') return cause.code;
  return error instanceof Error ? error.message : String(error);
}
