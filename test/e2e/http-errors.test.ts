import { startStack, type Stack } from '../support/stack.ts';

let stack: Stack;
beforeAll(async () => { stack = await startStack({ workers: 0 }); });
afterAll(async () => { await stack?.close(); });

const META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientInfo': { name: 'x', version: '1' }, 'io.modelcontextprotocol/clientCapabilities': {} };
async function post(body: string, token?: string, headers: Record<string, string> = {}) {
  const r = await fetch(stack.mcpUrl, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers }, body });
  return `${r.status} ${(await r.text()).slice(0, 300)}`;
}

test('explore', async () => {
  const token = await stack.token('alice', 'acme');
  const out: string[] = [];
  for (const depth of [100, 500, 1000, 2000, 5000, 100000]) {
    let deep = '1'; for (let i = 0; i < depth; i++) deep = `{"a":${deep}}`;
    out.push(`legacy ${depth}: ` + await post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{"x":${deep}}}}`, token));
    out.push(`modern ${depth}: ` + await post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{"x":${deep}},"_meta":${JSON.stringify(META)}}}`, token, { 'mcp-method': 'tools/call', 'mcp-name': 'whoami', 'mcp-protocol-version': '2026-07-28' }));
  }
  out.push('modern nope: ' + await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'nope', params: { _meta: META } }), token, { 'mcp-method': 'nope', 'mcp-protocol-version': '2026-07-28' }));
  console.log(out.join('\n'));
});
