export { startTracing, type Tracing, type TracingOptions } from './start-tracing.ts';
export { startTracingFromEnv } from './tracing-config.ts';
export { tracedFetch } from './traced-fetch.ts';
export { traceCarrier, runInJobTrace, inSpan, currentTraceIds } from './job-trace.ts';
