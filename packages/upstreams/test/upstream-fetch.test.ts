import { upstreamFetch } from '../src/upstream-fetch.ts';
import type { UpstreamError } from '../src/upstream-error.ts';

// The fetch the MCP client uses towards an upstream, over a scripted fetch (the seam the
// transport offers): which token goes out, what a 401/403/5xx/oversized answer becomes.
function scripted(responses: Array<() => Response>) {
  const seen: string[] = [];
  const fetchImpl = (async (_url: unknown, init?: RequestInit) => {
    seen.push(new Headers(init?.headers).get('authorization') ?? '');
    const next = responses.shift();
    if (!next) throw new TypeError('fetch failed');
    return next();
  }) as typeof fetch;
  return { seen, fetchImpl };
}

function options(fetchImpl: typeof fetch, faults: UpstreamError[] = []) {
  let n = 0;
  return {
    upstream: 'demo',
    token: async () => 'token-1',
    reauthenticate: async () => `token-${(n += 1) + 1}`,
    maxResponseBytes: 100,
    onFault: (e: UpstreamError) => faults.push(e),
    fetch: fetchImpl,
  };
}

test('a 401 is answered with one re-exchange and one retry carrying the new token', async () => {
  const { seen, fetchImpl } = scripted([
    () => new Response('', { status: 401 }),
    () => new Response('{}', { status: 200 }),
  ]);
  const r = await upstreamFetch(options(fetchImpl))('http://u/mcp', { method: 'POST' });
  expect(r.status).toBe(200);
  expect(seen).toEqual(['Bearer token-1', 'Bearer token-2']);
});

test('a second 401 is upstream_unauthorized; a 403 is upstream_forbidden; a 5xx upstream_server_error', async () => {
  const twice = scripted([
    () => new Response('', { status: 401 }),
    () => new Response('', { status: 401 }),
  ]);
  await expect(upstreamFetch(options(twice.fetchImpl))('http://u/mcp')).rejects.toMatchObject({
    code: 'upstream_unauthorized',
  });
  expect(twice.seen).toHaveLength(2);
  const forbidden = scripted([() => new Response('no', { status: 403 })]);
  await expect(upstreamFetch(options(forbidden.fetchImpl))('http://u/mcp')).rejects.toMatchObject({
    code: 'upstream_forbidden',
    status: 403,
  });
  const down = scripted([() => new Response('', { status: 503 })]);
  await expect(upstreamFetch(options(down.fetchImpl))('http://u/mcp')).rejects.toMatchObject({
    code: 'upstream_server_error',
  });
});

test('no answer at all is upstream_unreachable', async () => {
  const none = scripted([]);
  await expect(upstreamFetch(options(none.fetchImpl))('http://u/mcp')).rejects.toMatchObject({
    code: 'upstream_unreachable',
  });
});

test('an answer over the cap is refused, declared or streamed, and reported as a fault', async () => {
  const faults: UpstreamError[] = [];
  const declared = scripted([
    () => new Response('x'.repeat(500), { status: 200, headers: { 'content-length': '500' } }),
  ]);
  await expect(
    upstreamFetch(options(declared.fetchImpl, faults))('http://u/mcp'),
  ).rejects.toMatchObject({ code: 'upstream_response_too_large' });
  const streamed = scripted([
    () =>
      new Response(
        new ReadableStream({
          start(c) {
            c.enqueue(new TextEncoder().encode('x'.repeat(80)));
            c.enqueue(new TextEncoder().encode('x'.repeat(80)));
            c.close();
          },
        }),
        { status: 200 },
      ),
  ]);
  const r = await upstreamFetch(options(streamed.fetchImpl, faults))('http://u/mcp');
  await expect(r.text()).rejects.toMatchObject({ code: 'upstream_response_too_large' });
  expect(faults.map((f) => f.code)).toEqual([
    'upstream_response_too_large',
    'upstream_response_too_large',
  ]);
});
