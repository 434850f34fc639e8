/**
 * A JSON-RPC error as the v1 SDK's server sends it: `{ code, message, data }` from the thrown
 * error's own fields. Not the SDK's McpError: its message is already `MCP error <code>: …`,
 * and the client's McpError prepends that prefix again (`MCP error -32602: MCP error -32602:
 * Task not found`). The wire carries the bare message; each client adds its own prefix.
 */
export class WireError extends Error {
  readonly code: number;
  readonly data: unknown;
  constructor(code: number, message: string, data?: unknown) {
    super(message);
    this.name = 'WireError';
    this.code = code;
    this.data = data;
  }
}
