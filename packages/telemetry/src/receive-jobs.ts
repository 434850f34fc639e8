import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  trace,
  type Context,
  type Link,
} from '@opentelemetry/api';

const tracer = () => trace.getTracer('mcp-task-gateway');

/**
 * How this process turns the SDK's tracing off for a call (`suppressTracing` of
 * @opentelemetry/core): set by startTracing, which is the only place the SDK is loaded; while
 * it is unset tracing is off and every span is a no-op anyway.
 */
let suppress: ((ctx: Context) => Context) | undefined;
export function setTracingSuppressor(fn: ((ctx: Context) => Context) | undefined): void {
  suppress = fn;
}

/**
 * Fetches jobs from a queue with a `receive <queue>` span only when the fetch returned some.
 * pg-boss opens a span for every fetch, and a worker's safety poll and wake-ups mostly find
 * nothing: one root trace per empty fetch buried the traces that matter. So the fetch itself
 * runs with tracing suppressed, and a fetch that brought jobs is recorded afterwards with its
 * real start and end, linked to the trace of each job it brought (its creating request's).
 */
export async function receiveJobs<J extends { id: string; data?: unknown }>(
  queue: string,
  fetch: () => Promise<J[]>,
): Promise<J[]> {
  if (!suppress) return fetch();
  const startTime = performance.timeOrigin + performance.now();
  const jobs = await context.with(suppress(context.active()), fetch);
  if (jobs.length === 0) return jobs;
  const links: Link[] = [];
  for (const job of jobs) {
    const carrier = job.data && typeof job.data === 'object' ? job.data : undefined;
    if (!carrier) continue;
    const sc = trace
      .getSpan(propagation.extract(ROOT_CONTEXT, carrier as Record<string, string>))
      ?.spanContext();
    if (sc && trace.isSpanContextValid(sc)) links.push({ context: sc });
  }
  const span = tracer().startSpan(
    `receive ${queue}`,
    {
      kind: SpanKind.CLIENT,
      startTime,
      links,
      attributes: {
        'messaging.system': 'pg-boss',
        'messaging.operation.name': 'receive',
        'messaging.operation.type': 'receive',
        'messaging.destination.name': queue,
        ...(jobs.length === 1
          ? { 'messaging.message.id': jobs[0]!.id }
          : { 'messaging.batch.message_count': jobs.length }),
      },
    },
    ROOT_CONTEXT,
  );
  span.end();
  return jobs;
}
