import { trace, TraceFlags } from '@opentelemetry/api';
import { inSpan } from '@mtg/telemetry';

// The asynchronous verbs (toolScope is a synchronous lookup and stays as it is).
const VERBS = new Set([
  'start',
  'get',
  'read',
  'result',
  'awaitResult',
  'cancel',
  'answer',
  'list',
]);
// Verbs about one existing task: their span links to the trace that started it.
const ABOUT_A_TASK = new Set([
  'get',
  'read',
  'result',
  'awaitResult',
  'cancel',
  'answer',
  'decide',
]);
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * Every verb of the task service as a span (`task.start`, `task.get` …): the start's
 * transaction and the job it enqueues are children of it. A poll or cancel of a task is a
 * span of its own request's trace, linked to the task's (the context its job carries), read
 * by `traceOfJob` only while tracing: with tracing off no query is added.
 */
export function withTaskSpans<T extends object>(
  service: T,
  traceOfJob?: (jobId: string) => Promise<string | undefined>,
): T {
  return new Proxy(service, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function' || typeof property !== 'string' || !VERBS.has(property))
        return value;
      return (...args: unknown[]) =>
        inSpan(`task.${property}`, {}, async () => {
          const outcome = await (value as (...a: unknown[]) => unknown).apply(target, args);
          if (traceOfJob && ABOUT_A_TASK.has(property)) await linkToTask(outcome, traceOfJob);
          return outcome;
        });
    },
  });
}

async function linkToTask(
  outcome: unknown,
  traceOfJob: (jobId: string) => Promise<string | undefined>,
): Promise<void> {
  const span = trace.getActiveSpan();
  if (!span?.isRecording()) return;
  const jobId = (outcome as { ok?: boolean; row?: { job_id?: string | null } } | undefined)?.row
    ?.job_id;
  if (!(outcome as { ok?: boolean }).ok || !jobId) return;
  const m = TRACEPARENT.exec((await traceOfJob(jobId).catch(() => undefined)) ?? '');
  if (!m) return;
  span.addLink({
    context: {
      traceId: m[1]!,
      spanId: m[2]!,
      traceFlags: Number.parseInt(m[3]!, 16) & TraceFlags.SAMPLED,
      isRemote: true,
    },
    attributes: { 'mtg.link': 'task' },
  });
  span.setAttribute('mtg.task.trace_id', m[1]!);
}
