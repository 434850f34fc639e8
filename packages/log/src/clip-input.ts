import { redact } from './redact.ts';

/** The most characters of one request-derived value that a log line echoes. */
export const MAX_ECHOED_CHARS = 200;

/**
 * A value taken from a request (a path, a header, a body field, an error message quoting one)
 * made fit for a log field: embedded tokens redacted first (so a cut cannot leave part of
 * one behind), then cut to `max` characters with a marker counting what was dropped. Without
 * it one request can make a log line as long as its headers or body; with it the line still
 * says what was wrong.
 */
export function clipInput(value: string, max = MAX_ECHOED_CHARS): string {
  const clean = redact(value) as string;
  if (clean.length <= max) return clean;
  // Never keep half of a surrogate pair.
  const end = /[\uD800-\uDBFF]/.test(clean[max - 1] ?? '') ? max - 1 : max;
  return `${clean.slice(0, end)}…(+${clean.length - end} chars)`;
}
