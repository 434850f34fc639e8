import { csvField } from '@mtg/audit';

/** Rows for a terminal (aligned columns), a spreadsheet (CSV) or a program (JSON). */
export type RowFormat = 'table' | 'csv' | 'json';

function text(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'object') return JSON.stringify(value);
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- objects are JSON above: a scalar
  return String(value);
}

export function formatRows(
  format: RowFormat,
  columns: readonly string[],
  rows: readonly Record<string, unknown>[],
): string {
  if (format === 'json') {
    const objects = rows.map((r) =>
      Object.fromEntries(
        columns.map((c) => [c, r[c] instanceof Date ? text(r[c]) : (r[c] ?? null)]),
      ),
    );
    return JSON.stringify(objects, null, 2) + '\n';
  }
  if (format === 'csv') {
    return [columns, ...rows.map((r) => columns.map((c) => r[c]))]
      .map((line) => line.map((v) => csvField(text(v))).join(','))
      .join('\r\n')
      .concat('\r\n');
  }
  const cells = [
    columns.map(String),
    ...rows.map((r) => columns.map((c) => text(r[c]).replaceAll('\n', ' '))),
  ];
  const widths = columns.map((_, i) =>
    Math.min(60, Math.max(...cells.map((line) => line[i]!.length))),
  );
  const clip = (s: string, w: number) => (s.length > w ? s.slice(0, w - 1) + '…' : s.padEnd(w));
  const lines = cells.map((line) =>
    line
      .map((c, i) => clip(c, widths[i]!))
      .join('  ')
      .trimEnd(),
  );
  lines.splice(1, 0, widths.map((w) => '-'.repeat(w)).join('  '));
  return lines.join('\n') + `\n(${rows.length} row${rows.length === 1 ? '' : 's'})\n`;
}
