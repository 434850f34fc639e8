import { cellText } from '../http/export.ts';
import { html, SafeHtml } from '../http/html.ts';

export interface Column<R> {
  key: keyof R & string;
  label: string;
  /** A link or other markup for the cell; default: its text. */
  cell?: (row: R) => SafeHtml | string;
}

/** A timestamp as cellText writes it (ISO 8601 UTC). */
const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

/**
 * Columns of names (clients, principals, tools, workers, processes): a name such as `mcp-agent` would
 * otherwise break at its hyphen; it moves to the next line whole (console.css, td.name).
 */
const NAME_COLUMNS = new Set([
  'client',
  'subject',
  'actor_subject',
  'principal',
  'tool',
  'worker',
  'process',
  'upstream',
]);

/** A cell's default markup: its text, a timestamp as a <time> that does not wrap. */
function defaultCell(value: unknown): SafeHtml | string {
  const text = cellText(value);
  return TIMESTAMP.test(text) ? html`<time datetime="${text}">${text}</time>` : text;
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
              const v = c.cell ? c.cell(r) : defaultCell((r as Record<string, unknown>)[c.key]);
              return NAME_COLUMNS.has(c.key)
                ? html`<td class="name">${v}</td>`
                : html`<td>${v}</td>`;
            })}
          </tr>`,
      )}
    </tbody>
  </table>`;
}
