import http from 'node:http';
import { freePort } from './stack.ts';

/**
 * An MCP server that misbehaves on purpose, for what no real server does on demand: it
 * initializes and lists its tools correctly, then answers `tools/call` of `garbage` with a
 * body that is not JSON-RPC, of `huge` with a body larger than any sane cap, and of `hang`
 * never. Raw HTTP, no SDK: the point is the bytes.
 */
export async function startMisbehavingUpstream() {
  const port = await freePort();
  const tools = ['garbage', 'huge', 'hang'].map((name) => ({
    name,
    description: `misbehaves: ${name}`,
    inputSchema: { type: 'object', properties: {} },
  }));
  const server = http.createServer((req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(405).end();
      return;
    }
    let text = '';
    req.on('data', (c) => (text += c));
    req.on('end', () => {
      const message = JSON.parse(text || '{}') as { id?: number; method?: string; params?: any };
      const reply = (result: unknown) =>
        res
          .writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 's-1' })
          .end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
      if (message.id === undefined) {
        res.writeHead(202).end();
        return;
      }
      if (message.method === 'initialize') {
        reply({
          protocolVersion: '2025-11-25',
          capabilities: { tools: {} },
          serverInfo: { name: 'misbehaving', version: '0' },
        });
      } else if (message.method === 'tools/list') {
        reply({ tools });
      } else if (message.params?.name === 'garbage') {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":');
      } else if (message.params?.name === 'huge') {
        reply({ content: [{ type: 'text', text: 'x'.repeat(2_000_000) }] });
      } else {
        // hang: never answer
      }
    });
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}
