import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  ErrorCode,
  isJSONRPCRequest,
  type JSONRPCErrorResponse,
  type JSONRPCMessage,
} from '@modelcontextprotocol/sdk/types.js';

/** What this module needs of an SDK v1 request schema (zod v4 classic objects). */
export interface RequestSchema {
  shape: { method: { value: string } };
  safeParse(value: unknown): {
    success: boolean;
    error?: { issues: Array<{ path: PropertyKey[]; message: string }> };
  };
}

const MAX_ISSUES = 3;

/**
 * The v1 SDK parses each request against its handler's schema inside the handler call
 * (Protocol.setRequestHandler → parseWithCompat) and answers the ZodError that throws, which
 * has no numeric `code`, as -32603 Internal error with the issue list as JSON for message.
 * Params that fail the schema are the caller's mistake: checked here, before the server sees
 * the request, they are answered -32602 with a one-line summary. Call after `server.connect`,
 * which installs the `onmessage` this wraps.
 */
export function refuseInvalidParams(transport: Transport, schemas: readonly RequestSchema[]): void {
  const byMethod = new Map(schemas.map((s) => [s.shape.method.value, s]));
  const forward = transport.onmessage;
  transport.onmessage = (message, extra) => {
    const refusal = invalidParams(message, byMethod);
    if (!refusal) return forward?.(message, extra);
    transport.send(refusal).catch((error: unknown) => transport.onerror?.(error as Error));
  };
}

function invalidParams(
  message: JSONRPCMessage,
  byMethod: ReadonlyMap<string, RequestSchema>,
): JSONRPCErrorResponse | undefined {
  if (!isJSONRPCRequest(message)) return undefined;
  const schema = byMethod.get(message.method);
  const parsed = schema?.safeParse(message);
  if (!parsed || parsed.success) return undefined;
  const issues = parsed.error?.issues ?? [];
  const listed = issues.slice(0, MAX_ISSUES).map((i) => {
    // Paths are relative to the request; name them relative to params.
    const path = i.path[0] === 'params' ? i.path.slice(1) : i.path;
    return `${path.map(String).join('.') || 'params'}: ${i.message}`;
  });
  const more = issues.length > MAX_ISSUES ? ` (+${issues.length - MAX_ISSUES} more)` : '';
  return {
    jsonrpc: '2.0',
    id: message.id,
    error: {
      code: ErrorCode.InvalidParams,
      message: `Invalid params for ${message.method}: ${listed.join('; ')}${more}`,
    },
  };
}
