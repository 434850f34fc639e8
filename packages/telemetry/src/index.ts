export { startTracing, type Tracing, type TracingOptions } from './start-tracing.ts';
export { startTracingFromEnv } from './tracing-config.ts';
export {
  traceCarrier,
  runInJobTrace,
  inSpan,
  jobTracesContinue,
  outsideSpans,
} from './job-trace.ts';
export { receiveJobs } from './receive-jobs.ts';
