const EXT = 'io.modelcontextprotocol/tasks';
let nextId = 1;

/**
 * Sends one 2026-07-28 request as the v2 client frames it (per-request `_meta` envelope,
 * MCP-Protocol-Version / Mcp-Method / Mcp-Name headers), optionally declaring the tasks
 * extension. The v2 Client itself refuses task replies, so the extension is driven raw.
 */
export async function rpc2026(
  mcpUrl: string,
  token: string,
  method: string,
  params: Record<string, unknown>,
  options: { tasksExtension?: boolean; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: any }> {
  const name =
    method === 'tools/call'
      ? String(params.name)
      : typeof params.taskId === 'string'
        ? params.taskId
        : undefined;
  const response = await fetch(mcpUrl, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': method,
      ...(name ? { 'mcp-name': name } : {}),
      ...options.headers,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: nextId++,
      method,
      params: {
        ...params,
        _meta: {
          ...(params._meta as object | undefined),
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'raw-2026', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': options.tasksExtension
            ? { extensions: { [EXT]: {} } }
            : {},
        },
      },
    }),
  });
  const text = await response.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {
    // SSE or empty: keep the text
  }
  return { status: response.status, body };
}
