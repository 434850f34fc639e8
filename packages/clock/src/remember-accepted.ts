import { nowMs } from './clock.ts';

export interface RememberOptions<V> {
  /** How long an accepted value is taken on trust without checking again. */
  maxAgeMs: number;
  /** Values remembered at most; the oldest is forgotten first. */
  maxEntries?: number;
  /**
   * Until when (epoch ms) a value may be remembered, e.g. its token's `exp` plus the check's
   * clock tolerance; undefined: the check refused, and nothing is remembered.
   */
  acceptedUntil(value: V): number | undefined;
  now?: () => number;
}

/**
 * A check (a token's signature, say) that remembers what it accepted, keyed by its whole
 * input, so only the very same input can hit: for at most `maxAgeMs` and never past what
 * `acceptedUntil` says. Refusals are never remembered, so a refused input is checked again
 * each time. With `maxAgeMs` 0 every call checks.
 */
export function rememberAccepted<V>(
  check: (input: string) => Promise<V>,
  options: RememberOptions<V>,
): (input: string) => Promise<V> {
  if (options.maxAgeMs <= 0) return check;
  const max = options.maxEntries ?? 10_000;
  const now = options.now ?? (() => nowMs());
  const accepted = new Map<string, { until: number; value: V }>();
  return async (input) => {
    const t = now();
    const hit = accepted.get(input);
    if (hit) {
      if (t < hit.until) return hit.value;
      accepted.delete(input);
    }
    const value = await check(input);
    const bound = options.acceptedUntil(value);
    if (bound !== undefined && bound > t) {
      if (accepted.size >= max) accepted.delete(accepted.keys().next().value!);
      accepted.set(input, { until: Math.min(t + options.maxAgeMs, bound), value });
    }
    return value;
  };
}
