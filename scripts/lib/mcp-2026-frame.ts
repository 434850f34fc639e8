// A 2026-07-28 MCP request framed as the v2 client frames it: the per-request `_meta`
// envelope, and MCP-Protocol-Version / Mcp-Method / Mcp-Name headers agreeing with the body.
// For raw requests where the v2 client cannot be used: the tasks extension (which it does not
// speak), load generators, a chosen local address or client certificate.
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
const REVISION = '2026-07-28';

let nextId = 1;

/** The Mcp-Name header's value: the tool for tools/call, the task for tasks/*. */
export function mcpNameOf(method: string, params: Record<string, unknown>): string | undefined {
  if (method === 'tools/call') return String(params.name);
  return typeof params.taskId === 'string' ? params.taskId : undefined;
}

export function headers2026(token: string, method: string, name?: string): Record<string, string> {
  return {
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': REVISION,
    'mcp-method': method,
    ...(name !== undefined ? { 'mcp-name': name } : {}),
  };
}

export interface Envelope2026 {
  tasksExtension?: boolean;
  clientName?: string;
  id?: number | string;
}

export function body2026(
  method: string,
  params: Record<string, unknown>,
  options: Envelope2026 = {},
): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id: options.id ?? nextId++,
    method,
    params: {
      ...params,
      _meta: {
        ...(params._meta as object | undefined),
        'io.modelcontextprotocol/protocolVersion': REVISION,
        'io.modelcontextprotocol/clientInfo': {
          name: options.clientName ?? 'raw-2026',
          version: '1',
        },
        'io.modelcontextprotocol/clientCapabilities': options.tasksExtension
          ? { extensions: { [TASKS_EXTENSION]: {} } }
          : {},
      },
    },
  });
}

/** Headers and body of one request, Mcp-Name taken from the params. */
export function frame2026(
  token: string,
  method: string,
  params: Record<string, unknown>,
  options: Envelope2026 = {},
): { headers: Record<string, string>; body: string } {
  return {
    headers: headers2026(token, method, mcpNameOf(method, params)),
    body: body2026(method, params, options),
  };
}
