import { frame2026 } from '../../scripts/lib/mcp-2026-frame.ts';

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
  const frame = frame2026(token, method, params, {
    ...(options.tasksExtension ? { tasksExtension: true } : {}),
  });
  const response = await fetch(mcpUrl, {
    method: 'POST',
    headers: { ...frame.headers, ...options.headers },
    body: frame.body,
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
