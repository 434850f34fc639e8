// Raw 2026-07-28 MCP requests with the tasks extension, as the v2 client frames them: one
// self-contained POST per request (no session), so load generators can replay them.
import { body2026 as frameBody, headers2026, mcpNameOf } from '../../lib/mcp-2026-frame.ts';

export { headers2026 };

/** The bench's requests always declare the tasks extension. */
export function body2026(method: string, params: Record<string, unknown>, id?: number | string) {
  return frameBody(method, params, {
    tasksExtension: true,
    clientName: 'mtg-bench',
    ...(id !== undefined ? { id } : {}),
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
  const name = mcpNameOf(method, params);
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
