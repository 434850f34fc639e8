import { httpFetch } from '@mtg/identity';
import type { Json, TargetClient } from '@mtg/tool-kit';
import { DownstreamUnreachable, type DownstreamResilience } from '../downstream-resilience.ts';

/** A downstream answered with an error status; 4xx are the tool's problem, 5xx transient. */
export class DownstreamError extends Error {
  readonly code = 'downstream_refused';
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = 'DownstreamError';
    this.status = status;
  }
}

const PATH_PROBLEMS = {
  dot: "has a '.' or '..' segment",
  parameter: "has a ';' in a segment (a path parameter some servers read or strip)",
  double:
    "is percent-encoded twice ('%25': a server that decodes again would see what was checked as something else)",
} as const;

/**
 * A path a tool asked for that could leave the target's base path on some server: `.`/`..`
 * segments (plain, encoded or encoded twice), `;` path parameters (`..;/` walks up on servers
 * that strip them) and double encoding.
 */
export class TargetPathError extends TypeError {
  readonly code = 'invalid_target_path';
  constructor(path: string, problem: keyof typeof PATH_PROBLEMS = 'dot') {
    super(`target path ${JSON.stringify(path.slice(0, 200))} ${PATH_PROBLEMS[problem]}`);
    this.name = 'TargetPathError';
  }
}

export interface TargetClientOptions {
  name: string;
  baseUrl: string;
  taskId: string;
  /** Asked before every attempt: a fresh short-lived token when the last one nears expiry. */
  token: () => Promise<string>;
  /** The task's signal: a call made without its own signal stops with the task. */
  signal: AbortSignal;
  /** Runs before every call: the task's boundary check (cancel, deadline, lease, revocation). */
  beforeCall?: () => Promise<void>;
  fetch?: typeof fetch;
  /** Every call goes through the process's policies for this target (timeouts, retries, circuit). */
  resilience: DownstreamResilience;
}

/**
 * The HTTP client of one target for one task. Never sends the user's own token (no
 * passthrough): `token` hands out credentials exchanged for this target's audience. Retrying
 * writes is safe because every write carries its Idempotency-Key.
 */
export function createTargetClient(options: TargetClientOptions): TargetClient {
  const f = options.fetch ?? httpFetch;
  const base = new URL(options.baseUrl.endsWith('/') ? options.baseUrl : `${options.baseUrl}/`);
  const attempt = async (
    method: string,
    url: URL,
    signal: AbortSignal,
    body?: Json,
    key?: string,
  ): Promise<Json> => {
    const token = await options.token();
    let response: Response;
    try {
      response = await f(url, {
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
      throw new DownstreamUnreachable(`${method} ${url.pathname}: ${causeOf(error)}`, error);
    }
    const text = await response.text();
    if (!response.ok)
      throw new DownstreamError(
        response.status,
        `${options.name}: ${method} ${url.pathname} → ${response.status}: ${text.slice(0, 200)}`,
      );
    return (text ? JSON.parse(text) : {}) as Json;
  };
  const call = async (
    method: string,
    path: string,
    signal: AbortSignal | undefined,
    body?: Json,
    key?: string,
  ) => {
    const url = resolvePath(base, path);
    await options.beforeCall?.();
    return options.resilience.run(options.baseUrl, signal ?? options.signal, (s) =>
      attempt(method, url, s, body, key),
    );
  };
  const write =
    (method: string) =>
    (path: string, body: Json, o: { idempotencyKey: string; signal?: AbortSignal }) => {
      if (!o?.idempotencyKey)
        throw new TypeError(`${method} to ${options.name} needs an idempotencyKey`);
      return call(method, path, o.signal, body, o.idempotencyKey);
    };
  return {
    name: options.name,
    get: (path, o) => call('GET', path, o?.signal),
    post: write('POST'),
    put: write('PUT'),
    patch: write('PATCH'),
    delete: (path, o) => {
      if (!o?.idempotencyKey)
        throw new TypeError(`DELETE to ${options.name} needs an idempotencyKey`);
      return call('DELETE', path, o.signal, undefined, o.idempotencyKey);
    },
  };
}

/**
 * Resolves a tool's path under the target's base URL. A `.` or `..` segment (also
 * percent-encoded, once or twice) is refused: `/api/collections/${name}/records` with name
 * `..` must not become `/api/records`. So are a `;` in a segment (`..;` is `..` to a server
 * that strips path parameters) and an encoded `%` (a server that decodes twice would see a
 * path other than the one checked here). The query is the target's to read.
 */
export function resolvePath(base: URL, path: string): URL {
  const [pathname] = path.split(/[?#]/, 1) as [string];
  for (const segment of pathname.split('/')) {
    const once = decoded(segment);
    if (/%25/i.test(segment)) throw new TargetPathError(path, 'double');
    if (once.includes(';')) throw new TargetPathError(path, 'parameter');
    const twice = decoded(once);
    for (const form of [once, twice]) {
      if (form.split(/[/\\]/).some((part) => part === '.' || part === '..')) {
        throw new TargetPathError(path);
      }
    }
  }
  const relative = path.replace(/^\/+/, '');
  const url = new URL(relative, base);
  if (url.origin !== base.origin || !url.pathname.startsWith(base.pathname)) {
    throw new TargetPathError(path);
  }
  return url;
}

function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text; // a malformed escape is sent as is; the target answers it
  }
}

/** fetch() says "fetch failed"; the reason (ECONNREFUSED, ECONNRESET…) is in its cause. */
function causeOf(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | null)?.cause;
  if (cause && typeof cause.code === 'string') return cause.code;
  return error instanceof Error ? error.message : String(error);
}
