import { AsyncLocalStorage } from 'node:async_hooks';

/** Where a request came from: the client's address and what it says it is. */
export interface RequestOrigin {
  /** The peer's address, or the client's from X-Forwarded-For when the peer is a trusted proxy. */
  ip?: string;
  /** The User-Agent header, clipped. */
  userAgent?: string;
}

// Carried with the request through its async work, as OpenTelemetry carries its context: the
// denials are written deep inside the task service and the guards, which should not each
// take the HTTP request to learn where it came from.
const storage = new AsyncLocalStorage<RequestOrigin>();

/** Runs `fn` (and everything it starts) as the handling of a request from `origin`. */
export function runWithRequestOrigin<T>(origin: RequestOrigin, fn: () => T): T {
  return storage.run(origin, fn);
}

/** The origin of the request being handled, if any. */
export function currentRequestOrigin(): RequestOrigin | undefined {
  return storage.getStore();
}
