/**
 * One CSV field (RFC 4180 quoting) that a spreadsheet will not run as a formula.
 *
 * OWASP's CSV injection guidance: a cell starting with `=`, `+`, `-`, `@`, a tab or a carriage
 * return is prefixed with `'`. Spreadsheets also skip leading whitespace before deciding a
 * cell is a formula (" =1+1", "\n=1+1", "\u00a0=1+1" all evaluate in some of them), so the
 * check looks past any leading whitespace — every Unicode space, the no-break and zero-width
 * ones, line breaks — and also treats the fullwidth forms (＝ ＋ － ＠) as the characters
 * they stand for. The audit CLI's CSV and the console's exports both write their fields here,
 * so there is one guard to keep right.
 */
const FORMULA_START =
  /^[\s\u00a0\u180e\u200b-\u200d\u2060\ufeff]*[=+\-@\uff1d\uff0b\uff0d\uff20]|^[\t\r\n]/u;

export function csvField(text: string): string {
  const safe = FORMULA_START.test(text) ? `'${text}` : text;
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}
