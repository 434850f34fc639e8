import { context, propagation, trace } from '@opentelemetry/api';
import { setTracingSuppressor } from './receive-jobs.ts';
import { tracedFetch } from './traced-fetch.ts';

export interface TracingOptions {
  /** `service.name` of every span this process exports (gateway, worker …). */
  serviceName: string;
  /** The OTLP/HTTP endpoint's base URL; spans go to `<endpoint>/v1/traces` as OTLP JSON. */
  endpoint: string;
  /** Extra headers for the exporter (OTEL_EXPORTER_OTLP_HEADERS), e.g. an API key. */
  headers?: Record<string, string>;
  /** How long spans wait in the batch before they are sent (OTEL_BSP_SCHEDULE_DELAY). */
  scheduledDelayMs?: number;
  /** `service.instance.id`, e.g. the worker id. */
  instanceId?: string;
}

export interface Tracing {
  /** Sends what is buffered and stops; restores the global fetch. */
  shutdown(): Promise<void>;
}

/**
 * Turns tracing on for this process: the OpenTelemetry SDK with an OTLP/HTTP exporter, the
 * W3C trace-context propagator and an AsyncLocalStorage context manager, registered as the
 * API's globals (pg-boss and our own spans use them), and a global fetch that makes a client
 * span of each outgoing request and carries `traceparent`. The SDK is imported only here:
 * with tracing off, nothing of it is loaded and every span is the API's no-op.
 */
export async function startTracing(options: TracingOptions): Promise<Tracing> {
  const [{ TracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, core, resources, hooks] =
    await Promise.all([
      import('@opentelemetry/sdk-trace'),
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/core'),
      import('@opentelemetry/resources'),
      import('@opentelemetry/context-async-hooks'),
    ]);
  const exporter = new OTLPTraceExporter({
    url: `${options.endpoint.replace(/\/$/, '')}/v1/traces`,
    ...(options.headers ? { headers: options.headers } : {}),
  });
  const provider = new TracerProvider({
    resource: resources.resourceFromAttributes({
      'service.name': options.serviceName,
      'service.namespace': 'mcp-task-gateway',
      ...(options.instanceId ? { 'service.instance.id': options.instanceId } : {}),
    }),
    spanProcessors: [
      new BatchSpanProcessor({
        exporter,
        ...(options.scheduledDelayMs !== undefined
          ? { scheduledDelayMillis: options.scheduledDelayMs }
          : {}),
      }),
    ],
  });
  const contextManager = new hooks.AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new core.W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  const originalFetch = globalThis.fetch;
  globalThis.fetch = tracedFetch(originalFetch);
  setTracingSuppressor(core.suppressTracing);
  return {
    async shutdown() {
      globalThis.fetch = originalFetch;
      setTracingSuppressor(undefined);
      await provider.forceFlush().catch(() => {});
      await provider.shutdown().catch(() => {});
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}
