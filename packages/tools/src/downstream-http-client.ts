import type { DownstreamClient } from './long-tool.ts';

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
 * every call, so the caller can hand out a fresh short-lived credential when the last one
 * is near expiry. Never sends the user's own token (no passthrough).
 */
export function createDownstreamClient(options: {
  baseUrl: string;
  taskId: string;
  token: () => Promise<string>;
  fetch?: typeof fetch;
  timeoutMs?: number;
}): DownstreamClient {
  const f = options.fetch ?? fetch;
  const call = async (method: string, path: string, signal: AbortSignal, body?: unknown, key?: string) => {
    const timeout = AbortSignal.timeout(options.timeoutMs ?? 30_000);
    const response = await f(new URL(path, options.baseUrl), {
      method,
      signal: AbortSignal.any([signal, timeout]),
      headers: {
        authorization: `Bearer ${await options.token()}`,
        'x-task-id': options.taskId,
        ...(key ? { 'idempotency-key': key } : {}),
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await response.text();
    if (!response.ok) throw new DownstreamError(response.status, `${method} ${path} → ${response.status}: ${text.slice(0, 200)}`);
    return (text ? JSON.parse(text) : {}) as Record<string, unknown>;
  };
  return {
    write: (path, body, o) => call('POST', path, o.signal, body, o.idempotencyKey),
    read: (path, o) => call('GET', path, o.signal),
  };
}
