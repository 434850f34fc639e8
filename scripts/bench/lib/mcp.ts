// Raw 2026-07-28 MCP requests with the tasks extension, as the v2 client frames them: one
// self-contained POST per request (no session), so load generators can replay them.
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

let nextId = 1;

export function headers2026(token: string, method: string, name?: string): Record<string, string> {
  return {
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': method,
    ...(name ? { 'mcp-name': name } : {}),
  };
}

export function body2026(
  method: string,
  params: Record<string, unknown>,
  id: number | string = nextId++,
): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientInfo': { name: 'mtg-bench', version: '1' },
        'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS_EXTENSION]: {} } },
      },
    },
  });
}

export interface RpcReply {
  status: number;
  body: any;
  ms: number;
}

/** One request; `name` is the tool (tools/call) or task id (tasks/*) for the Mcp-Name header. */
export async function rpc(
  mcpUrl: string,
  token: string,
  method: string,
  params: Record<string, unknown>,
  options: { signal?: AbortSignal } = {},
): Promise<RpcReply> {
  const name =
    method === 'tools/call'
      ? String(params.name)
      : typeof params.taskId === 'string'
        ? params.taskId
        : undefined;
  const started = performance.now();
  const response = await fetch(mcpUrl, {
    method: 'POST',
    headers: headers2026(token, method, name),
    body: body2026(method, params),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const text = await response.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: response.status, body, ms: performance.now() - started };
}

/** Starts a task on the 2026 wire; returns its id (throws with the reply otherwise). */
export async function startTask(
  mcpUrl: string,
  token: string,
  tool: string,
  args: Record<string, unknown>,
): Promise<string> {
  const r = await rpc(mcpUrl, token, 'tools/call', { name: tool, arguments: args });
  const id = r.body?.result?.taskId;
  if (typeof id !== 'string')
    throw new Error(`start failed: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
  return id;
}
