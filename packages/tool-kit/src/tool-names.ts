/** MCP tool names: 1–64 of letters, digits, `_`, `-`, `.` (also valid pg-boss queue names). */
export const TOOL_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/** OAuth scope tokens (RFC 6749 §3.3), without spaces. */
const SCOPE = /^[\x21\x23-\x5B\x5D-\x7E]{1,128}$/;

export function assertToolName(name: unknown): asserts name is string {
  if (typeof name !== 'string' || !TOOL_NAME.test(name)) {
    throw new TypeError(`tool name ${JSON.stringify(name)} must match ${TOOL_NAME}`);
  }
}

export function assertScope(scope: unknown, tool: string): asserts scope is string {
  if (typeof scope !== 'string' || !SCOPE.test(scope)) {
    throw new TypeError(`tool ${tool}: scope ${JSON.stringify(scope)} is not a valid OAuth scope`);
  }
}
