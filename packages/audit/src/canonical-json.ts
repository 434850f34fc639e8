/**
 * A value of an event's body that the statement appending the event fills in (one that
 * statement computes or changes: a lease's epoch, a task's duration). See
 * `auditAppendTemplate`.
 */
export class SqlFilled {
  readonly name: string;
  constructor(name: string) {
    this.name = name;
  }
}

/** In a template's text, where a filled value goes: no JSON text holds a raw NUL. */
export const FILL_MARK = '\u0000';

/**
 * Canonical JSON in the manner of RFC 8785 (JCS): object keys sorted by UTF-16 code units,
 * no whitespace, JSON.stringify's number and string forms (which JCS adopts). `undefined`
 * members are dropped. This exact text is what the audit chain hashes. A `SqlFilled` value
 * is written as FILL_MARK and its name pushed on `filled`, in text order.
 */
export function canonicalJson(value: unknown, filled?: string[]): string {
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'number' && !Number.isFinite(value)) {
      throw new TypeError('canonicalJson: non-finite number');
    }
    return JSON.stringify(value) ?? 'null';
  }
  if (value instanceof SqlFilled) {
    if (!filled) throw new TypeError('canonicalJson: a filled value outside a template');
    filled.push(value.name);
    return FILL_MARK;
  }
  if (Array.isArray(value)) {
    return (
      '[' + value.map((v) => (v === undefined ? 'null' : canonicalJson(v, filled))).join(',') + ']'
    );
  }
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return (
    '{' +
    entries.map(([k, v]) => JSON.stringify(k) + ':' + canonicalJson(v, filled)).join(',') +
    '}'
  );
}
