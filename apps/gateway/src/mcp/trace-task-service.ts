import { inSpan } from '@mtg/telemetry';

// The asynchronous verbs (toolScope is a synchronous lookup and stays as it is).
const VERBS = new Set(['start', 'get', 'result', 'awaitResult', 'cancel', 'list']);

/**
 * Every verb of the task service as a span (`task.start`, `task.get` …): the start's
 * transaction and the job it enqueues are children of it.
 */
export function withTaskSpans<T extends object>(service: T): T {
  return new Proxy(service, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function' || typeof property !== 'string' || !VERBS.has(property))
        return value;
      return (...args: unknown[]) =>
        inSpan(`task.${property}`, {}, async () =>
          (value as (...a: unknown[]) => unknown).apply(target, args),
        );
    },
  });
}
