import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
const c = new Client({ name: 'p', version: '1' }, { capabilities: {} });
const t = new StreamableHTTPClientTransport(new URL('http://127.0.0.1:9777/mcp'));
await c.connect(t);
const tools = await c.listTools();
for (const x of tools.tools) console.log(x.name, JSON.stringify(x.execution), JSON.stringify(x.inputSchema).slice(0, 200));
console.log('session', t.sessionId, t.protocolVersion);
