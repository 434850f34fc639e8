import { request } from 'undici';

/**
 * The fetch of the task path's own HTTP calls: token exchanges (the gateway's delegation at
 * each start, a worker's downstream token at each stage) and tools' calls to their targets.
 * It answers as fetch does (a `Response`; a network failure is fetch's `TypeError('fetch
 * failed')` with the reason as its `cause`; an abort rejects with the signal's reason;
 * redirects are followed as fetch follows them unless `redirect` says otherwise), but sends
 * with undici's `request()`, on kept-alive connections: the global fetch builds WHATWG
 * request and response streams around every call, which cost about a quarter of a
 * millisecond of CPU per request more (docs/scaling.md, "The cost of one task").
 *
 * What it does not take (a `Request` as input, a stream, form or blob body) goes to the
 * global fetch, and so does every call while the global fetch is not the one this process
 * started with (tracing wraps it, each call a client span carrying `traceparent`; a test may
 * stand in for it) or while Node's proxy support is on.
 */
export const httpFetch: typeof fetch = (input, init) => {
  const body = init?.body;
  if (
    globalThis.fetch !== startingFetch ||
    envProxy ||
    input instanceof Request ||
    !(
      body === undefined ||
      body === null ||
      typeof body === 'string' ||
      body instanceof URLSearchParams ||
      body instanceof Uint8Array
    )
  )
    return globalThis.fetch(input, init);
  return send(input instanceof URL ? input : new URL(input), init ?? {}, body, 0);
};

const startingFetch = globalThis.fetch;
/**
 * Node's own proxy support (`NODE_USE_ENV_PROXY=1` or `--use-env-proxy`: HTTP_PROXY,
 * HTTPS_PROXY, NO_PROXY) applies to the global fetch only: with it on, every call goes there.
 */
const envProxy =
  /^(1|true)$/i.test(process.env.NODE_USE_ENV_PROXY ?? '') ||
  process.execArgv.includes('--use-env-proxy');

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** Statuses whose response has no body (a `Response` with one would be refused). */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);
/** What the calls say they are (the global fetch sends `node`). */
const USER_AGENT = 'mcp-task-gateway';
/** As fetch: a chain of more redirects than this is a network error. */
const MAX_REDIRECTS = 20;

async function send(
  url: URL,
  init: RequestInit,
  body: string | URLSearchParams | Uint8Array | null | undefined,
  hops: number,
): Promise<Response> {
  const signal = init.signal ?? undefined;
  signal?.throwIfAborted();
  const method = (init.method ?? 'GET').toUpperCase();
  const headers = headerRecord(init.headers);
  // The global fetch says `node`; some firewalls in front of an IdP refuse a request with none.
  headers['user-agent'] ??= USER_AGENT;
  let payload: string | Uint8Array | undefined;
  if (body instanceof URLSearchParams) {
    payload = body.toString();
    headers['content-type'] ??= 'application/x-www-form-urlencoded;charset=UTF-8';
  } else if (typeof body === 'string') {
    payload = body;
    headers['content-type'] ??= 'text/plain;charset=UTF-8';
  } else payload = body ?? undefined;
  let answer;
  try {
    answer = await request(url, {
      method: method as 'GET',
      headers,
      body: payload,
      ...(signal ? { signal } : {}),
    });
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    throw new TypeError('fetch failed', { cause: error });
  }
  const location = answer.headers.location;
  const mode = init.redirect ?? 'follow';
  if (REDIRECTS.has(answer.statusCode) && typeof location === 'string' && mode !== 'manual') {
    await answer.body.dump();
    if (mode === 'error' || hops >= MAX_REDIRECTS)
      throw new TypeError('fetch failed', { cause: new Error('redirect') });
    const next = new URL(location, url);
    // As fetch: a 303, and a 301 or 302 answering a POST, go on as GET without a body; and
    // credentials do not follow the request to another origin.
    const asGet =
      answer.statusCode === 303 ? method !== 'HEAD' : answer.statusCode <= 302 && method === 'POST';
    const nextHeaders = { ...headers };
    if (next.origin !== url.origin) delete nextHeaders.authorization;
    if (asGet) delete nextHeaders['content-type'];
    return send(
      next,
      { ...init, headers: nextHeaders, method: asGet ? 'GET' : method },
      asGet ? undefined : body,
      hops + 1,
    );
  }
  let content: Uint8Array;
  try {
    content = new Uint8Array(await answer.body.arrayBuffer());
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    throw new TypeError('fetch failed', { cause: error });
  }
  const responseHeaders = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    if (Array.isArray(value)) for (const v of value) responseHeaders.append(name, v);
    else if (value !== undefined) responseHeaders.append(name, value);
  }
  return new Response(NULL_BODY.has(answer.statusCode) ? null : content, {
    status: answer.statusCode,
    headers: responseHeaders,
  });
}

/** The request's headers as a record of lower-case names (the forms fetch takes). */
function headerRecord(init: RequestInit['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  if (!init) return out;
  if (init instanceof Headers || Array.isArray(init)) {
    for (const [name, value] of init) {
      const key = name.toLowerCase();
      out[key] = out[key] === undefined ? value : `${out[key]}, ${value}`;
    }
    return out;
  }
  for (const [name, value] of Object.entries(init as Record<string, string>))
    out[name.toLowerCase()] = value;
  return out;
}
