import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
} from '@opentelemetry/api';

const tracer = () => trace.getTracer('mcp-task-gateway');

/**
 * The current trace context as job data (`traceparent`, `tracestate`), stored with the job in
 * the transaction that creates the task; `{}` when tracing is off.
 */
export function traceCarrier(): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier;
}

/**
 * Runs `fn` in a span that continues the trace `carrier` names (a job's data): the worker's
 * run of a task is a span of the trace of the request that started it.
 */
export function runInJobTrace<T>(
  carrier: unknown,
  name: string,
  attributes: Attributes,
  fn: () => Promise<T>,
): Promise<T> {
  const parent =
    carrier && typeof carrier === 'object'
      ? propagation.extract(ROOT_CONTEXT, carrier as Record<string, string>)
      : ROOT_CONTEXT;
  return inSpan(name, { kind: SpanKind.CONSUMER, attributes }, fn, parent);
}

/** Runs `fn` in a child span of the current one (a no-op span when tracing is off). */
export function inSpan<T>(
  name: string,
  options: { kind?: SpanKind; attributes?: Attributes },
  fn: () => Promise<T>,
  parent = context.active(),
): Promise<T> {
  return tracer().startActiveSpan(name, options, parent, async (span) => {
    try {
      return await fn();
    } catch (error) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
      throw error;
    } finally {
      span.end();
    }
  });
}

/** The current span's ids, for log lines and audit events; undefined when not tracing. */
export function currentTraceIds(): { traceId: string; spanId: string } | undefined {
  const sc = trace.getActiveSpan()?.spanContext();
  if (!sc || !trace.isSpanContextValid(sc)) return undefined;
  return { traceId: sc.traceId, spanId: sc.spanId };
}

/**
 * Whether a job's trace context continues its trace in this process (tracing on: a
 * propagator reads `traceparent`), as runInJobTrace would: then a run's events carry the
 * job's trace id.
 */
export function jobTracesContinue(): boolean {
  const probe = propagation.extract(ROOT_CONTEXT, {
    traceparent: `00-${'1'.repeat(32)}-${'1'.repeat(16)}-01`,
  });
  const sc = trace.getSpanContext(probe);
  return sc !== undefined && trace.isSpanContextValid(sc);
}

/** Runs `fn` outside any span (what it writes carries no trace id). */
export function outsideSpans<T>(fn: () => T): T {
  return context.with(trace.deleteSpan(context.active()), fn);
}
