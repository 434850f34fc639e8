/** Stable reasons an upstream request did not produce an answer. */
export type UpstreamErrorCode =
  | 'upstream_unreachable' // no HTTP answer (refused, reset, DNS)
  | 'upstream_timeout' // no answer within the request's bound
  | 'upstream_server_error' // HTTP 5xx
  | 'upstream_circuit_open' // too many transient failures: calls fail fast for a while
  | 'upstream_unauthorized' // 401 even after one re-exchange
  | 'upstream_forbidden' // 403: the upstream refuses this user or tool
  | 'upstream_session_lost' // the upstream no longer knows the journaled MCP session
  | 'upstream_protocol_error' // not JSON-RPC, or not the shape MCP requires
  | 'upstream_response_too_large' // over maxResponseBytes
  | 'upstream_refused' // a JSON-RPC error or a 4xx: the upstream said no
  | 'upstream_not_ready'; // its tools have never been listed

/** Transient: worth waiting for (the circuit counts them; tasks wait instead of failing). */
export const TRANSIENT_UPSTREAM_ERRORS: ReadonlySet<UpstreamErrorCode> = new Set([
  'upstream_unreachable',
  'upstream_timeout',
  'upstream_server_error',
  'upstream_circuit_open',
]);

export class UpstreamError extends Error {
  readonly code: UpstreamErrorCode;
  readonly upstream: string;
  /** HTTP status or JSON-RPC error code when the upstream gave one. */
  readonly status?: number;
  constructor(
    code: UpstreamErrorCode,
    upstream: string,
    message: string,
    options: { status?: number; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? {} : { cause: options.cause });
    this.name = 'UpstreamError';
    this.code = code;
    this.upstream = upstream;
    if (options.status !== undefined) this.status = options.status;
  }
  get transient(): boolean {
    return TRANSIENT_UPSTREAM_ERRORS.has(this.code);
  }
}

export function isUpstreamError(error: unknown): error is UpstreamError {
  return (error as { name?: unknown } | null)?.name === 'UpstreamError';
}
