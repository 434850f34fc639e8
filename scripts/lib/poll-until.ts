/** Polls `fn` until `done(value)` or the timeout; returns the last value. */
export async function pollUntil<T>(
  fn: () => Promise<T>,
  done: (v: T) => boolean,
  timeoutMs = 30_000,
  everyMs = 100,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (done(v) || Date.now() > until) return v;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
