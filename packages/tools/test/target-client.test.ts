import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createDownstreamResilience, createTargetClient, DownstreamError } from '../src/index.ts';
import { resolvePath } from '../src/targets/target-client.ts';

const base = new URL('http://127.0.0.1:9/api/v1/');

test('a path resolves under the base path; a . or .. segment, plain or encoded, is refused', () => {
  expect(resolvePath(base, '/collections/a/records').href).toBe(
    'http://127.0.0.1:9/api/v1/collections/a/records',
  );
  expect(resolvePath(base, 'reports/source?report=x.y&rows=2').href).toBe(
    'http://127.0.0.1:9/api/v1/reports/source?report=x.y&rows=2',
  );
  for (const bad of [
    '/collections/../records',
    '/collections/./records',
    '/collections/%2e%2e/records',
    '/collections/%2E%2E/records',
    '/collections/..%2f..%2fadmin/records',
    '/..',
  ]) {
    expect(() => resolvePath(base, bad)).toThrow(
      expect.objectContaining({ code: 'invalid_target_path' }),
    );
  }
  // Dots inside a segment are ordinary.
  expect(resolvePath(base, '/collections/a..b/records').pathname).toBe(
    '/api/v1/collections/a..b/records',
  );
});

test("a ';' in a segment and double encoding are refused too: '..;' and '%252e%252e' walk up on servers that strip parameters or decode twice", () => {
  for (const [bad, says] of [
    ['/collections/..;/records', "';'"],
    ['/collections/..;jsessionid=x/records', "';'"],
    ['/collections/a;b/records', "';'"],
    ['/collections/%3B/records', "';'"],
    ['/collections/%252e%252e/records', "'%25'"],
    ['/collections/%252E%252E%252Fadmin/records', "'%25'"],
    ['/collections/100%25/records', "'%25'"],
  ] as const) {
    expect(() => resolvePath(base, bad)).toThrow(
      expect.objectContaining({
        code: 'invalid_target_path',
        message: expect.stringContaining(says),
      }),
    );
  }
  // The query is the target's: a ';' or an encoded '%' there is data.
  expect(resolvePath(base, '/reports/source?q=a;b&p=100%25').search).toBe('?q=a;b&p=100%25');
});

test('the client sends the handed-out token and the idempotency key, refuses a write without one, and names a refusal by code', async () => {
  const seen: Array<{ method?: string; url?: string; auth?: string; key?: string }> = [];
  const server = http.createServer((req, res) => {
    seen.push({
      method: req.method,
      url: req.url,
      auth: req.headers.authorization,
      key: req.headers['idempotency-key'] as string | undefined,
    });
    req.resume();
    res.statusCode = req.url?.includes('missing') ? 404 : 200;
    res.end(JSON.stringify({ ok: true }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const calls: string[] = [];
    const client = createTargetClient({
      name: 'crm',
      baseUrl: url,
      taskId: 't1',
      token: async () => 'exchanged-token',
      signal: new AbortController().signal,
      beforeCall: async () => {
        calls.push('boundary');
      },
      resilience: createDownstreamResilience({
        attemptTimeoutMs: 2000,
        retries: 0,
        backoffInitialMs: 1,
        backoffMaxMs: 1,
        breakerThreshold: 100,
        breakerCooldownMs: 100,
      }),
    });
    await client.post('/api/x', { a: 1 }, { idempotencyKey: 't1:step' });
    expect(seen[0]).toEqual({
      method: 'POST',
      url: '/api/x',
      auth: 'Bearer exchanged-token',
      key: 't1:step',
    });
    expect(calls).toEqual(['boundary']);
    expect(() => client.post('/api/x', {}, { idempotencyKey: '' })).toThrow(TypeError);
    await expect(client.get('/api/missing')).rejects.toBeInstanceOf(DownstreamError);
    await expect(client.get('/api/missing')).rejects.toMatchObject({
      code: 'downstream_refused',
      status: 404,
    });
    await expect(client.get('/api/../admin')).rejects.toMatchObject({
      code: 'invalid_target_path',
    });
    expect(seen).toHaveLength(3); // the refused path never left the process
  } finally {
    await new Promise<void>((r) => server.close(() => r()));
  }
});
