/**
 * The fetch init of one JSON body POSTed to the MCP endpoint with `token`, as a client of the
 * wire `headers` name would (the protocol version header among them).
 */
export function mcpPost(
  token: string,
  headers: Record<string, string>,
  body: unknown,
): RequestInit & { method: 'POST' } {
  return {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...headers,
    },
    body: JSON.stringify(body),
  };
}

/**
 * POSTs one JSON body to the MCP endpoint (mcpPost); the status and the body (JSON, or the
 * text of an SSE or empty answer).
 */
export async function postMcp(
  mcpUrl: string,
  token: string,
  headers: Record<string, string>,
  body: unknown,
): Promise<{ status: number; body: any }> {
  const r = await fetch(mcpUrl, mcpPost(token, headers, body));
  const text = await r.text();
  return { status: r.status, body: text.startsWith('{') ? JSON.parse(text) : text };
}
