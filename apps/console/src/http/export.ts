import type { Response } from 'express';
import { csvField } from '@mtg/audit';

/** A cell as text: timestamps in ISO 8601 UTC, objects as JSON. */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'object') return JSON.stringify(value);
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- objects are JSON above: a scalar
  return String(value);
}

export function toCsv(
  columns: readonly string[],
  rows: readonly Record<string, unknown>[],
): string {
  // csvField: RFC 4180 quoting, and a leading ' on what a spreadsheet would run as a formula.
  const lines = [columns.map(csvField).join(',')];
  for (const row of rows) lines.push(columns.map((c) => csvField(cellText(row[c]))).join(','));
  return lines.join('\r\n') + '\r\n';
}

export type ExportFormat = 'csv' | 'json';

export function exportFormatOf(value: unknown): ExportFormat | undefined | 'invalid' {
  if (value === undefined || value === 'html') return undefined;
  return value === 'csv' || value === 'json' ? value : 'invalid';
}

/** Sends a list as a download: CSV with a header row, or a JSON array of objects. */
export function sendExport(
  res: Response,
  format: ExportFormat,
  name: string,
  columns: readonly string[],
  rows: readonly Record<string, unknown>[],
): void {
  res.set('Content-Disposition', `attachment; filename="${name}.${format}"`);
  if (format === 'csv') {
    res.type('text/csv; charset=utf-8').send(toCsv(columns, rows));
    return;
  }
  const objects = rows.map((r) =>
    Object.fromEntries(
      columns.map((c) => [c, r[c] instanceof Date ? r[c].toISOString() : (r[c] ?? null)]),
    ),
  );
  res.type('application/json').send(JSON.stringify(objects, null, 2));
}
