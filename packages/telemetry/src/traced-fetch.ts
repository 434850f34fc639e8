import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';

const tracer = () => trace.getTracer('mcp-task-gateway');

/**
 * A fetch that makes each request a CLIENT span of the current trace and sends the trace
 * context with it (`traceparent`): token exchanges, downstream and upstream calls, JWKS
 * fetches, security event pushes. The URL is recorded without its query string.
 */
export function tracedFetch(inner: typeof fetch): typeof fetch {
  return (input, init) => {
    const request = input instanceof Request ? input : undefined;
    // A caller that sends its own trace context (a proxy, a test playing an agent) keeps it.
    if (new Headers(init?.headers ?? request?.headers).has('traceparent'))
      return inner(input, init);
    const method = (init?.method ?? request?.method ?? 'GET').toUpperCase();
    const href = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    let url: string;
    try {
      const u = new URL(href);
      url = `${u.origin}${u.pathname}`;
    } catch {
      url = 'invalid';
    }
    return tracer().startActiveSpan(
      `HTTP ${method}`,
      { kind: SpanKind.CLIENT, attributes: { 'http.request.method': method, 'url.full': url } },
      async (span) => {
        const headers = new Headers(init?.headers ?? request?.headers);
        propagation.inject(context.active(), headers, {
          set: (carrier, key, value) => carrier.set(key, value),
        });
        try {
          const response = await inner(input, { ...init, headers });
          span.setAttribute('http.response.status_code', response.status);
          if (response.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
          return response;
        } catch (error) {
          span.recordException(error as Error);
          span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
          throw error;
        } finally {
          span.end();
        }
      },
    );
  };
}
