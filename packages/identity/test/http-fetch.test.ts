import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { httpFetch } from '../src/index.ts';

// A loopback server that answers what each path asks for, and records what it was sent.
interface Seen {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}
const seen: Seen[] = [];
let server: http.Server;
let base: string;
let otherOrigin: string;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const url = new URL(req.url!, 'http://x');
      seen.push({ method: req.method!, path: url.pathname, headers: req.headers, body });
      const to = url.searchParams.get('to');
      if (url.pathname.startsWith('/redirect/')) {
        res.writeHead(Number(url.pathname.split('/')[2]), { location: to ?? '/echo' });
        return res.end('moved');
      }
      if (url.pathname === '/loop') {
        res.writeHead(302, { location: '/loop' });
        return res.end();
      }
      if (url.pathname === '/empty') {
        res.writeHead(204);
        return res.end();
      }
      if (url.pathname === '/slow') return void setTimeout(() => res.end('late'), 2_000).unref();
      if (url.pathname === '/cut') return req.socket.destroy();
      res.writeHead(url.pathname === '/refuse' ? 401 : 200, [
        'content-type',
        'application/json',
        'set-cookie',
        'a=1',
        'set-cookie',
        'b=2',
      ]);
      res.end(JSON.stringify({ method: req.method, body }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  base = `http://127.0.0.1:${port}`;
  // The same server under another name: another origin, for the credential rule.
  otherOrigin = `http://localhost:${port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const last = () => seen[seen.length - 1]!;

describe('httpFetch answers as the global fetch does', () => {
  test('a JSON POST: status, headers (repeated ones too) and body', async () => {
    for (const f of [fetch, httpFetch]) {
      const r = await f(`${base}/echo`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', authorization: 'Bearer t' },
        body: JSON.stringify({ a: 1 }),
      });
      expect(r).toBeInstanceOf(Response);
      expect(r.status).toBe(200);
      expect(r.ok).toBe(true);
      expect(r.headers.get('content-type')).toBe('application/json');
      expect(r.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
      expect(await r.json()).toEqual({ method: 'POST', body: '{"a":1}' });
      expect(last().headers['content-type']).toBe('application/json');
      expect(last().headers.authorization).toBe('Bearer t');
    }
  });

  test('a form body (as an OAuth client sends it) gets the form content type', async () => {
    for (const f of [fetch, httpFetch]) {
      const form = new URLSearchParams({ grant_type: 'x', scope: 'a b' });
      const r = await f(new URL(`${base}/token`), {
        method: 'POST',
        headers: new Headers({ accept: 'application/json' }),
        body: form,
      });
      await r.text();
      expect(last().body).toBe('grant_type=x&scope=a+b');
      expect(last().headers['content-type']).toBe(
        'application/x-www-form-urlencoded;charset=UTF-8',
      );
      expect(last().headers.accept).toBe('application/json');
    }
  });

  test('an error status is an answer, not a rejection', async () => {
    for (const f of [fetch, httpFetch]) {
      const r = await f(`${base}/refuse`);
      expect(r.status).toBe(401);
      expect(r.ok).toBe(false);
      expect(await r.text()).toContain('GET');
    }
  });

  test('a status without a body', async () => {
    for (const f of [fetch, httpFetch]) {
      const r = await f(`${base}/empty`, { method: 'DELETE' });
      expect(r.status).toBe(204);
      expect(await r.text()).toBe('');
    }
  });

  test('redirects: followed; a 303 goes on as GET; manual hands back the 3xx', async () => {
    for (const f of [fetch, httpFetch]) {
      let r = await f(`${base}/redirect/307`, { method: 'POST', body: 'kept' });
      expect(await r.json()).toEqual({ method: 'POST', body: 'kept' });
      r = await f(`${base}/redirect/303`, { method: 'POST', body: 'dropped' });
      expect(await r.json()).toEqual({ method: 'GET', body: '' });
      r = await f(`${base}/redirect/302`, { method: 'POST', body: 'dropped' });
      expect(await r.json()).toEqual({ method: 'GET', body: '' });
      r = await f(`${base}/redirect/302`, { redirect: 'manual' });
      expect(r.status).toBe(302);
      await r.text();
      await expect(f(`${base}/redirect/302`, { redirect: 'error' })).rejects.toMatchObject({
        name: 'TypeError',
      });
      await expect(f(`${base}/loop`)).rejects.toMatchObject({ name: 'TypeError' });
    }
  });

  test('credentials do not follow a redirect to another origin', async () => {
    for (const f of [fetch, httpFetch]) {
      const to = encodeURIComponent(`${otherOrigin}/echo`);
      const r = await f(`${base}/redirect/307?to=${to}`, {
        method: 'POST',
        headers: { authorization: 'Bearer secret' },
        body: 'x',
      });
      await r.text();
      expect(last().path).toBe('/echo');
      expect(last().headers.host).toMatch(/^localhost:/);
      expect(last().headers.authorization).toBeUndefined();
    }
  });

  test("a network failure is TypeError('fetch failed') with the reason as its cause", async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    for (const f of [fetch, httpFetch]) {
      const error = await f(`http://127.0.0.1:${port}/`).catch((e: unknown) => e);
      // (the global fetch's errors are of Node's realm, not the test's: compared by name)
      expect((error as Error).name).toBe('TypeError');
      expect((error as Error).message).toBe('fetch failed');
      expect((error as { cause: { code: string } }).cause.code).toBe('ECONNREFUSED');
      const cut = await f(`${base}/cut`).catch((e: unknown) => e);
      expect((cut as Error).name).toBe('TypeError');
    }
  });

  test("an abort rejects with the signal's reason, before or during the call", async () => {
    for (const f of [fetch, httpFetch]) {
      const reason = new Error('stop');
      const before = AbortSignal.abort(reason);
      await expect(f(`${base}/echo`, { signal: before })).rejects.toBe(reason);
      const during = new AbortController();
      const call = f(`${base}/slow`, { signal: during.signal });
      setTimeout(() => during.abort(reason), 50);
      await expect(call).rejects.toBe(reason);
    }
  });

  test("it sends with undici's request(), not through the global fetch", async () => {
    // The global fetch adds its browser headers to every request; request() sends none.
    await (await fetch(`${base}/echo`)).text();
    expect(last().headers['sec-fetch-mode']).toBe('cors');
    await (await httpFetch(`${base}/echo`)).text();
    expect(last().headers['sec-fetch-mode']).toBeUndefined();
    // It names itself, as the global fetch does (`node`): some firewalls refuse no name.
    expect(last().headers['user-agent']).toBe('mcp-task-gateway');
    await (await httpFetch(`${base}/echo`, { headers: { 'User-Agent': 'agent/1' } })).text();
    expect(last().headers['user-agent']).toBe('agent/1');
  });

  test("with Node's proxy support on, calls go through the global fetch (which proxies)", async () => {
    const source = fileURLToPath(new URL('../src/http-fetch.ts', import.meta.url));
    const code = `import(${JSON.stringify(source)}).then((m) => m.httpFetch(${JSON.stringify(`${base}/echo`)})).then((r) => r.text()).then(() => {}, (e) => { console.error(e); process.exit(1); })`;
    const exit = await new Promise<number | null>((resolve) => {
      const child = spawn(process.execPath, ['-e', code], {
        env: { ...process.env, NODE_USE_ENV_PROXY: '1' },
        stdio: 'inherit',
      });
      child.on('close', resolve);
    });
    expect(exit).toBe(0);
    expect(last().headers['sec-fetch-mode']).toBe('cors');
  });

  test('while the global fetch is replaced (tracing, a test), calls go through it', async () => {
    const original = globalThis.fetch;
    const through: string[] = [];
    globalThis.fetch = (input: string | URL | Request, init?: RequestInit) => {
      through.push(String(input));
      return original(input, init);
    };
    try {
      const r = await httpFetch(`${base}/echo`);
      expect(r.status).toBe(200);
    } finally {
      globalThis.fetch = original;
    }
    expect(through).toEqual([`${base}/echo`]);
    await (await httpFetch(`${base}/echo`)).text();
    expect(through).toHaveLength(1);
  });
});
