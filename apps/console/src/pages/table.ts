import { cellText } from '../http/export.ts';
import { html, SafeHtml } from '../http/html.ts';

export interface Column<R> {
  key: keyof R & string;
  label: string;
  /** A link or other markup for the cell; default: its text. */
  cell?: (row: R) => SafeHtml | string;
}

export function table<R extends object>(
  columns: Column<R>[],
  rows: R[],
  empty = 'Nothing found.',
): SafeHtml {
  if (rows.length === 0) return html`<p class="empty">${empty}</p>`;
  return html`<table>
    <thead>
      <tr>
        ${columns.map((c) => html`<th>${c.label}</th>`)}
      </tr>
    </thead>
    <tbody>
      ${rows.map(
        (r) =>
          html`<tr>
            ${columns.map((c) => {
              const v = c.cell ? c.cell(r) : cellText((r as Record<string, unknown>)[c.key]);
              return html`<td>${v}</td>`;
            })}
          </tr>`,
      )}
    </tbody>
  </table>`;
}
