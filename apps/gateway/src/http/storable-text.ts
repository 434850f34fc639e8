// U+0000, or a UTF-16 surrogate without its pair (valid in JSON text, not in UTF-8).
// eslint-disable-next-line no-control-regex -- NUL is what PostgreSQL text cannot store
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether PostgreSQL can store the string as text (no NUL, no unpaired surrogate). */
export const isStorableText = (s: string): boolean => !UNSTORABLE.test(s);

export const UNSTORABLE_TEXT_MESSAGE =
  'strings must be valid Unicode without U+0000 or unpaired surrogates';

/** Any string (value or key) in the value that cannot be stored as UTF-8 text. */
export function hasUnstorableText(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const current = stack.pop();
    if (typeof current === 'string') {
      if (UNSTORABLE.test(current)) return true;
    } else if (current && typeof current === 'object') {
      for (const [key, child] of Object.entries(current)) {
        if (UNSTORABLE.test(key)) return true;
        stack.push(child);
      }
    }
  }
  return false;
}
