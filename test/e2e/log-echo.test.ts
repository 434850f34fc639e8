// Log lines that quote request input (paths, headers, body fields, SDK error messages built
// from them) are clipped: one request cannot make a gateway log line as long as its headers
// or its body, the line still says what was wrong, and tokens stay redacted.
import { Writable } from 'node:stream';
import winston from 'winston';
import { createLogger, MAX_ECHOED_CHARS } from '@mtg/log';
import { headers, legacy, modern } from '../fuzz/corpus.ts';
import { destroyAgent, sendRaw, type RawRequest } from '../fuzz/send-raw.ts';
import { startStack, type Stack } from '../support/stack.ts';

interface Line {
  raw: string;
  message: string;
  level: string;
  correlationId?: string;
  [field: string]: unknown;
}

let stack: Stack;
let token: string;
let lines: Line[] = [];
// Whatever the input, a line stays around this size (fields are clipped, not the line).
const SHORT_LINE = 1_000;

beforeAll(async () => {
  const logger = createLogger('test');
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const raw of chunk.toString('utf8').split('\n').filter(Boolean))
        lines.push({ ...(JSON.parse(raw) as Omit<Line, 'raw'>), raw } as Line);
      done();
    },
  });
  logger.clear().add(new winston.transports.Stream({ stream: sink }));
  stack = await startStack({ workers: 0, logger });
  token = await stack.token('log-echo-user', 'log-echo-tenant');
});

afterAll(async () => {
  destroyAgent();
  await stack?.close();
});

/** Sends `request` and returns the log lines written for it (by message, once they appear). */
async function logsOf(request: RawRequest, message: string, correlationId?: string) {
  lines = [];
  const reply = await sendRaw(stack.gatewayUrl, request);
  const matching = () =>
    lines.filter(
      (l) => l.message === message && (!correlationId || l.correlationId === correlationId),
    );
  for (let waited = 0; matching().length === 0 && waited < 2_000; waited += 20)
    await new Promise((r) => setTimeout(r, 20));
  return { reply, found: matching(), all: lines };
}

test('a 10 KB Mcp-Method header that disagrees with the body is one short warning that still names the mismatch', async () => {
  const request = modern(token, 'tools/list', {});
  request.headers!['mcp-method'] = 'm'.repeat(10_000);
  const { reply, found } = await logsOf(request, 'mcp modern error');
  expect(reply.status).toBe(400);
  expect(found).toHaveLength(1);
  const [line] = found;
  expect(line!.level).toBe('warn');
  expect(line!.raw.length).toBeLessThan(SHORT_LINE);
  expect(line!.error).toMatch(/^Rejected inbound request \(method-header-mismatch\)/);
  expect(line!.error).toMatch(/…\(\+\d+ chars\)$/);
  expect((line!.error as string).length).toBeLessThanOrEqual(MAX_ECHOED_CHARS + 20);
});

test('a 100 KB tool name that disagrees with its Mcp-Name header is logged clipped, counting what was dropped', async () => {
  const request = modern(token, 'tools/call', { name: 'n'.repeat(100_000), arguments: {} });
  request.headers!['mcp-name'] = 'other_tool';
  const { found } = await logsOf(request, 'mcp modern error');
  expect(found).toHaveLength(1);
  expect(found[0]!.raw.length).toBeLessThan(SHORT_LINE);
  expect(found[0]!.error).toMatch(/\(name-header-mismatch\)/);
  const dropped = Number(/…\(\+(\d+) chars\)$/.exec(found[0]!.error as string)?.[1]);
  expect(dropped).toBeGreaterThan(99_000);
});

test('a 100 KB JSON-RPC method name is clipped in the request log line', async () => {
  const request: RawRequest = {
    headers: headers(token, { 'mcp-protocol-version': '2025-11-25', 'x-request-id': 'echo-rpc' }),
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'x'.repeat(100_000) }),
  };
  const { reply, found } = await logsOf(request, 'request', 'echo-rpc');
  expect(reply.body).toMatch(/-32601/);
  expect(found).toHaveLength(1);
  expect(found[0]!.raw.length).toBeLessThan(SHORT_LINE);
  expect(found[0]!.rpc).toMatch(/^x{200}…\(\+99800 chars\)$/);
});

test('a 10 KB path is clipped in the request log line', async () => {
  const request: RawRequest = {
    method: 'GET',
    path: `/${'p'.repeat(10_000)}`,
    headers: { 'x-request-id': 'echo-path' },
  };
  const { reply, found } = await logsOf(request, 'request', 'echo-path');
  expect(reply.status).toBe(404);
  expect(found[0]!.raw.length).toBeLessThan(SHORT_LINE);
  expect(found[0]!.path).toMatch(/^\/p+…\(\+\d+ chars\)$/);
});

test('a 100 KB malformed body and a 10 KB malformed bearer token leave only short lines', async () => {
  const badBody = await logsOf(
    { headers: headers(token, { 'x-request-id': 'echo-body' }), body: `{${'b'.repeat(100_000)}` },
    'request',
    'echo-body',
  );
  expect(badBody.reply.status).toBe(400);
  expect(badBody.reply.body).toMatch(/-32700/);
  const badToken = await logsOf(
    { headers: headers(`x${'t'.repeat(10_000)}`, { 'x-request-id': 'echo-token' }), body: '{}' },
    'token rejected',
    'echo-token',
  );
  expect(badToken.reply.status).toBe(401);
  expect(badToken.found[0]!.code).toBe('malformed');
  for (const line of [...badBody.all, ...badToken.all]) {
    expect(line.raw.length).toBeLessThan(SHORT_LINE);
    expect(line.raw).not.toMatch(/b{300}|t{300}/);
  }
});

test('a token quoted in a refused header stays redacted, even where the clip would cut it', async () => {
  // The SDK's message puts the header value past character 150: a cut made before redaction
  // would leave the token's first part in the line.
  const request = modern(token, 'tools/list', {});
  request.headers!['mcp-method'] = token;
  const { found } = await logsOf(request, 'mcp modern error');
  expect(found).toHaveLength(1);
  expect(found[0]!.error).toContain('[jwt]');
  expect(found[0]!.raw).not.toContain(token.split('.')[0]!.slice(0, 12));
  // Nor on the legacy wire, where the bearer token itself is never logged.
  const legacyReply = await logsOf(legacy(token, 'tools/list', {}), 'request');
  for (const line of legacyReply.all) expect(line.raw).not.toContain(token.split('.')[2]!);
});
