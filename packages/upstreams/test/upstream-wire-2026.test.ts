import { wire2026 } from '../src/upstream-wire-2026.ts';

// The 2026-07-28 wire towards an upstream, over a scripted fetch (the seam every upstream
// request goes through): how a request is framed, which answers mean "this upstream offers
// the tasks extension", and what garbage, errors and silence become.
type Sent = { headers: Headers; body: any };

function scripted(answer: (sent: Sent) => Response | Promise<Response>) {
  const sent: Sent[] = [];
  const fetchImpl = (async (_url: unknown, init?: RequestInit) => {
    const s = { headers: new Headers(init?.headers), body: JSON.parse(String(init?.body)) };
    sent.push(s);
    const signal = init?.signal as AbortSignal | undefined;
    return new Promise<Response>((resolve, reject) => {
      signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
      Promise.resolve(answer(s)).then(resolve, reject);
    });
  }) as typeof fetch;
  const wire = wire2026({
    upstream: 'modern',
    url: 'http://u/mcp',
    token: async () => 't',
    reauthenticate: async () => 't',
    maxResponseBytes: 10_000,
    fetch: fetchImpl,
  });
  return { sent, wire };
}

const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
const reply = (s: Sent, result: unknown) => json({ jsonrpc: '2.0', id: s.body.id, result });

test('a request is framed as the v2 client frames it, declaring the tasks extension', async () => {
  const { sent, wire } = scripted((s) => reply(s, { resultType: 'task', taskId: 'x' }));
  await wire.request('tools/call', { name: 'build', arguments: {} }, { timeoutMs: 1000 });
  const [s] = sent;
  expect(s!.headers.get('mcp-protocol-version')).toBe('2026-07-28');
  expect(s!.headers.get('mcp-method')).toBe('tools/call');
  expect(s!.headers.get('mcp-name')).toBe('build');
  expect(s!.body.params._meta).toMatchObject({
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientCapabilities': {
      extensions: { 'io.modelcontextprotocol/tasks': {} },
    },
  });
});

test('the upstream offers the extension only when server/discover lists 2026-07-28 and it', async () => {
  const offering = scripted((s) =>
    reply(s, {
      supportedVersions: ['2026-07-28'],
      capabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } },
    }),
  );
  expect(await offering.wire.offersTasks({ timeoutMs: 1000 })).toBe(true);
  const without = scripted((s) =>
    reply(s, { supportedVersions: ['2026-07-28'], capabilities: { tools: {} } }),
  );
  expect(await without.wire.offersTasks({ timeoutMs: 1000 })).toBe(false);
  // An upstream of the 2025 era refuses the probe (no session, not initialize).
  const older = scripted(() =>
    json({ jsonrpc: '2.0', error: { code: -32600, message: 'no session' }, id: null }, 400),
  );
  expect(await older.wire.offersTasks({ timeoutMs: 1000 })).toBe(false);
  const notFound = scripted((s) =>
    json({ jsonrpc: '2.0', id: s.body.id, error: { code: -32601, message: 'no such method' } }),
  );
  expect(await notFound.wire.offersTasks({ timeoutMs: 1000 })).toBe(false);
});

test('an upstream in trouble at the probe is an error (the task waits), never a choice of wire', async () => {
  const failing = scripted(() => new Response('', { status: 503 }));
  await expect(failing.wire.offersTasks({ timeoutMs: 1000 })).rejects.toMatchObject({
    code: 'upstream_server_error',
  });
  const silent = scripted(() => new Promise<Response>(() => {}));
  await expect(silent.wire.offersTasks({ timeoutMs: 100 })).rejects.toMatchObject({
    code: 'upstream_timeout',
  });
});

test('an SSE answer is read; a JSON-RPC error, garbage or an answer to another id are errors', async () => {
  const sse = scripted(
    (s) =>
      new Response(
        `event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}\n\n` +
          `event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: s.body.id, result: { status: 'working' } })}\n\n`,
        { headers: { 'content-type': 'text/event-stream' } },
      ),
  );
  expect(await sse.wire.request('tasks/get', { taskId: 'a' }, { timeoutMs: 1000 })).toEqual({
    status: 'working',
  });
  const refused = scripted((s) =>
    json({ jsonrpc: '2.0', id: s.body.id, error: { code: -32602, message: 'Task not found' } }),
  );
  await expect(
    refused.wire.request('tasks/get', { taskId: 'a' }, { timeoutMs: 1000 }),
  ).rejects.toMatchObject({ code: 'upstream_refused', status: -32602 });
  const garbage = scripted(() => new Response('<html>hi</html>', { status: 200 }));
  await expect(
    garbage.wire.request('tasks/get', { taskId: 'a' }, { timeoutMs: 1000 }),
  ).rejects.toMatchObject({ code: 'upstream_protocol_error' });
  const other = scripted((s) => json({ jsonrpc: '2.0', id: s.body.id + 1, result: {} }));
  await expect(
    other.wire.request('tasks/get', { taskId: 'a' }, { timeoutMs: 1000 }),
  ).rejects.toMatchObject({ code: 'upstream_protocol_error' });
});

test("the caller's abort stays the caller's", async () => {
  const silent = scripted(() => new Promise<Response>(() => {}));
  const stop = new AbortController();
  const reason = new Error('stopped');
  setTimeout(() => stop.abort(reason), 20);
  await expect(
    silent.wire.request('tasks/get', { taskId: 'a' }, { timeoutMs: 5000, signal: stop.signal }),
  ).rejects.toBe(reason);
});

test('an SSE answer is read as the EventSource spec reads it: CR line ends, comments, data split over lines', async () => {
  const answer = (id: number) => JSON.stringify({ jsonrpc: '2.0', id, result: { status: 'ok' } });
  const sse = scripted(
    (s) =>
      new Response(
        // Bare CR line ends (allowed by the spec), a keep-alive comment, and the message's
        // JSON split over two data lines (joined with a newline, which JSON allows).
        `: keep-alive\r\revent: message\rdata: ${answer(s.body.id).slice(0, 10)}\rdata: ${answer(s.body.id).slice(10)}\r\r`,
        { headers: { 'content-type': 'text/event-stream' } },
      ),
  );
  expect(await sse.wire.request('tasks/get', { taskId: 'a' }, { timeoutMs: 1000 })).toEqual({
    status: 'ok',
  });
});
