// The router against fake cells (plain HTTP servers) and a pinned key set: what it relays,
// how (streamed, headers both ways, body limits, a client going away), and what it answers
// itself (an unreachable cell, a Shared Signals push some cell did not take).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { createKeySource, resolveClaimMapping } from '@mtg/identity';
import { createLogger } from '@mtg/log';
import { parseCells } from '../src/cells-file.ts';
import { createCellRouter } from '../src/create-router.ts';
import { pollUntil } from '../../../test/support/poll.ts';

const ISSUER = 'http://127.0.0.1:1/issuer';
const logger = createLogger('cell-router-test', { silent: true });

interface FakeCell {
  url: string;
  seen: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders; body: string }>;
  /** How the next requests are answered (default: 200 JSON echo). */
  handler?: (req: http.IncomingMessage, res: http.ServerResponse) => void;
  closedStreams: number;
  server: http.Server;
}

async function fakeCell(): Promise<FakeCell> {
  const cell: FakeCell = { url: '', seen: [], closedStreams: 0, server: undefined as never };
  cell.server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      cell.seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      if (cell.handler) return cell.handler(req, res);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
  });
  await new Promise<void>((r) => cell.server.listen(0, '127.0.0.1', () => r()));
  cell.url = `http://127.0.0.1:${(cell.server.address() as AddressInfo).port}`;
  return cell;
}

let a: FakeCell;
let b: FakeCell;
let router: http.Server;
let app: ReturnType<typeof createCellRouter>;
let base: string;
let sign: (claims: Record<string, unknown>) => Promise<string>;

beforeAll(async () => {
  a = await fakeCell();
  b = await fakeCell();
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256' };
  const keys = createKeySource({ jwks: { keys: [jwk] } });
  router = http.createServer();
  await new Promise<void>((r) => router.listen(0, '127.0.0.1', () => r()));
  base = `http://127.0.0.1:${(router.address() as AddressInfo).port}`;
  sign = (claims) =>
    new SignJWT({
      iss: ISSUER,
      aud: `${base}/mcp`,
      sub: 'u',
      client_id: 'c',
      scope: 'reports:run',
      ...claims,
    })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1', typ: 'at+jwt' })
      .setIssuedAt()
      .setExpirationTime('1h')
      .sign(privateKey);
  app = createCellRouter({
    resource: `${base}/mcp`,
    cells: parseCells(
      {
        cells: { a: { url: a.url }, b: { url: b.url }, gone: { url: 'http://127.0.0.1:1' } },
        tenants: { acme: 'a', globex: 'b', lost: 'gone' },
      },
      'test',
    ),
    verify: {
      keys: keys.getKey,
      issuer: ISSUER,
      audience: `${base}/mcp`,
      requiredTyp: 'at+jwt',
      claims: resolveClaimMapping('default', {}),
    },
    keysReady: () => true,
    logger,
    maxBodyBytes: 2048,
    connectTimeoutMs: 2000,
  });
  router.on('request', app);
});

afterAll(async () => {
  app.close();
  for (const s of [router, a.server, b.server]) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

beforeEach(() => {
  a.seen = [];
  b.seen = [];
  a.handler = undefined;
  b.handler = undefined;
});

test('a request goes to its tenant’s cell with its headers, and the answer comes back with the cell’s', async () => {
  b.handler = (_req, res) =>
    res
      .writeHead(200, {
        'content-type': 'application/json',
        'mcp-session-id': 'session-1',
        connection: 'keep-alive',
      })
      .end('{"from":"b"}');
  const token = await sign({ tenant: 'globex' });
  const r = await fetch(`${base}/mcp?x=1`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      'mcp-session-id': 'session-1',
      'mcp-protocol-version': '2025-11-25',
      'x-forwarded-client-cert': 'forged-by-the-client',
    },
    body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
  });
  expect([r.status, r.headers.get('www-authenticate')]).toEqual([200, null]);
  expect(await r.json()).toEqual({ from: 'b' });
  expect(r.headers.get('mcp-session-id')).toBe('session-1');
  expect(a.seen).toEqual([]);
  const [seen] = b.seen;
  expect(seen).toMatchObject({
    method: 'POST',
    url: '/mcp?x=1',
    body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
  });
  expect(seen!.headers).toMatchObject({
    authorization: `Bearer ${token}`,
    'mcp-session-id': 'session-1',
    'mcp-protocol-version': '2025-11-25',
    host: new URL(base).host,
    'x-forwarded-for': '127.0.0.1',
    'x-forwarded-host': new URL(base).host,
  });
  expect(seen!.headers['x-forwarded-client-cert']).toBeUndefined();
  expect(seen!.headers['x-request-id']).toBe(r.headers.get('x-request-id'));
  // Administration is per tenant too.
  await fetch(`${base}/admin/principals/revoke`, {
    method: 'POST',
    headers: { authorization: `Bearer ${await sign({ tenant: 'acme' })}` },
    body: '{}',
  });
  expect(a.seen.map((s) => s.url)).toEqual(['/admin/principals/revoke']);
});

test('an SSE answer is relayed event by event, and a client that goes away ends the cell’s stream', async () => {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  a.handler = (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write('event: message\ndata: {"first":true}\n\n');
    res.once('close', () => a.closedStreams++);
    void released.then(() => res.write('data: {"second":true}\n\n'));
  };
  const abort = new AbortController();
  const r = await fetch(`${base}/mcp`, {
    method: 'GET',
    headers: {
      authorization: `Bearer ${await sign({ tenant: 'acme' })}`,
      accept: 'text/event-stream',
    },
    signal: abort.signal,
  });
  expect(r.headers.get('content-type')).toBe('text/event-stream');
  const reader = r.body!.getReader();
  // The first event arrives while the cell's answer is still open: nothing is buffered.
  expect(new TextDecoder().decode((await reader.read()).value)).toContain('"first":true');
  release();
  expect(new TextDecoder().decode((await reader.read()).value)).toContain('"second":true');
  const before = a.closedStreams;
  abort.abort();
  await pollUntil(
    async () => a.closedStreams,
    (n) => n > before,
    5000,
  );
});

test('a body over the limit is refused with 413 before or while it is relayed', async () => {
  const token = await sign({ tenant: 'acme' });
  const declared = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: 'x'.repeat(4096),
  });
  expect(declared.status).toBe(413);
  expect(a.seen).toEqual([]);
  const chunked = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: new ReadableStream({
      start(c) {
        for (let i = 0; i < 4; i++) c.enqueue(new TextEncoder().encode('y'.repeat(1024)));
        c.close();
      },
    }),
    duplex: 'half',
  });
  expect(chunked.status).toBe(413);
});

test('an unreachable cell is a 503 with Retry-After, not a 500; unknown paths are 404', async () => {
  const r = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${await sign({ tenant: 'lost' })}` },
    body: '{}',
  });
  expect(r.status).toBe(503);
  expect(r.headers.get('retry-after')).toBe('5');
  expect(((await r.json()) as any).error.message).toContain('unavailable');
  expect((await fetch(`${base}/metrics`)).status).toBe(404);
  const ready = await (await fetch(`${base}/readyz`)).json();
  expect(ready).toMatchObject({ ok: true, cells: { gone: false } });
});

describe('a Shared Signals push goes to every cell', () => {
  const push = () =>
    fetch(`${base}/ssf/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/secevent+jwt', authorization: 'Bearer push-secret' },
      body: 'a.set.jwt',
    });
  const accept = (_req: http.IncomingMessage, res: http.ServerResponse) => res.writeHead(202).end();

  test('202 only when every cell accepted; a cell that could not take it makes it a 503 to retry', async () => {
    a.handler = accept;
    b.handler = accept;
    // "gone" is unreachable: the transmitter must deliver again; the others saw it.
    const r = await push();
    expect(r.status).toBe(503);
    expect(await r.json()).toMatchObject({
      err: 'temporarily_unavailable',
      cells: { a: 202, b: 202, gone: 'unreachable' },
    });
    for (const cell of [a, b]) {
      expect(cell.seen).toHaveLength(1);
      expect(cell.seen[0]).toMatchObject({
        url: '/ssf/events',
        body: 'a.set.jwt',
        headers: {
          authorization: 'Bearer push-secret',
          'content-type': 'application/secevent+jwt',
        },
      });
    }
  });

  test("a cell's refusal of the SET is the answer when no cell failed for want of trying", async () => {
    const only = createCellRouter({
      resource: `${base}/mcp`,
      cells: parseCells({ cells: { a: { url: a.url }, b: { url: b.url } } }, 'test'),
      verify: undefined as never,
      keysReady: () => true,
      logger,
      maxBodyBytes: 2048,
      connectTimeoutMs: 2000,
    });
    const server = http.createServer(only);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/ssf/events`;
    const send = () =>
      fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/secevent+jwt' },
        body: 'x.y.z',
      });
    try {
      a.handler = accept;
      b.handler = accept;
      expect((await send()).status).toBe(202);
      b.handler = (_req, res) =>
        res
          .writeHead(400, { 'content-type': 'application/json' })
          .end('{"err":"invalid_key","description":"the SET signature is invalid"}');
      const refused = await send();
      expect(refused.status).toBe(400);
      expect(await refused.json()).toEqual({
        err: 'invalid_key',
        description: 'the SET signature is invalid',
      });
      expect((await fetch(url)).status).toBe(405);
    } finally {
      only.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
