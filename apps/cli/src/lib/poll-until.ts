import { inspect } from 'node:util';

/** A wait that ran out: names what it waited for and the last value it saw. */
export class PollTimeoutError<T = unknown> extends Error {
  readonly code = 'poll_timeout';
  readonly what: string;
  readonly timeoutMs: number;
  readonly last: T;
  constructor(what: string, timeoutMs: number, last: T) {
    super(
      `timed out after ${timeoutMs} ms waiting for ${what}; last value: ${inspect(last, { depth: 4, breakLength: Infinity }).slice(0, 2000)}`,
    );
    this.name = 'PollTimeoutError';
    this.what = what;
    this.timeoutMs = timeoutMs;
    this.last = last;
  }
}

/**
 * Polls `fn` until `done(value)` and returns that value; throws PollTimeoutError when the
 * timeout passes first, so a wait that never ended cannot pass for one that did. `what`
 * names the wait in that error (default: the predicate's source).
 */
export async function pollUntil<T>(
  fn: () => Promise<T>,
  done: (v: T) => boolean,
  timeoutMs = 30_000,
  everyMs = 100,
  what?: string,
): Promise<T> {
  const polled = await pollUntilOrLast(fn, done, timeoutMs, everyMs);
  if (!polled.done)
    throw new PollTimeoutError(what ?? `\`${String(done)}\``, timeoutMs, polled.value);
  return polled.value;
}

/**
 * For a caller that reports a timeout itself (a benchmark counting what did not finish):
 * polls like pollUntil but returns the last value with whether `done` ever held.
 */
export async function pollUntilOrLast<T>(
  fn: () => Promise<T>,
  done: (v: T) => boolean,
  timeoutMs = 30_000,
  everyMs = 100,
): Promise<{ done: boolean; value: T }> {
  const until = performance.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (done(value)) return { done: true, value };
    if (performance.now() > until) return { done: false, value };
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
