import type { Response } from 'express';
import { toCsv } from '@mtg/audit';

// The cells of a page's tables read as the cells of its CSV export do.
export { cellText } from '@mtg/audit';

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
    // The audit CLI's writer: RFC 4180 quoting, a leading ' on what a spreadsheet would run.
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
