import { stringify } from 'csv-stringify/sync';

/**
 * What a spreadsheet will not run as a formula.
 *
 * OWASP's CSV injection guidance: a cell starting with `=`, `+`, `-`, `@`, a tab or a carriage
 * return is prefixed with `'`. Spreadsheets also skip leading whitespace before deciding a
 * cell is a formula (" =1+1", "\n=1+1", "\u00a0=1+1" all evaluate in some of them), so the
 * check looks past any leading whitespace — every Unicode space, the no-break and zero-width
 * ones, line breaks — and also treats the fullwidth forms (＝ ＋ － ＠) as the characters
 * they stand for. csv-stringify's own `escape_formulas` checks only the first character, so
 * the guard stays ours; the quoting is the library's.
 */
const FORMULA_START =
  /^[\s\u00a0\u180e\u200b-\u200d\u2060\ufeff]*[=+\-@\uff1d\uff0b\uff0d\uff20]|^[\t\r\n]/u;

export function formulaSafe(text: string): string {
  return FORMULA_START.test(text) ? `'${text}` : text;
}

/** A cell as text: timestamps in ISO 8601 UTC, objects as JSON, nothing as empty. */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
    return String(value);
  return JSON.stringify(value) ?? '';
}

/**
 * Rows as RFC 4180 CSV (CRLF line ends, a header row of the column names): the one CSV
 * writer of the audit CLI and the console's exports, so there is one formula guard to keep
 * right.
 */
export function toCsv(
  columns: readonly string[],
  rows: readonly Record<string, unknown>[],
): string {
  const records = [
    columns.map((c) => formulaSafe(c)),
    ...rows.map((row) => columns.map((c) => formulaSafe(cellText(row[c])))),
  ];
  return stringify(records, { record_delimiter: 'windows' });
}
