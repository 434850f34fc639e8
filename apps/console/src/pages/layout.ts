import { html, type SafeHtml } from '../http/html.ts';
import type { Session } from '../http/session-store.ts';

const NAV: Array<{ href: string; label: string; staff: boolean; operator?: boolean }> = [
  { href: '/tasks', label: 'Tasks', staff: false },
  { href: '/approvals', label: 'Approvals', staff: false },
  { href: '/denials', label: 'Denials', staff: true },
  { href: '/principals', label: 'Principals', staff: true },
  { href: '/revocations', label: 'Revocations', staff: true },
  { href: '/chain', label: 'Chain health', staff: true },
  { href: '/evidence', label: 'Evidence', staff: true },
  { href: '/queues', label: 'Queues', staff: true, operator: true },
];

/** The page around every view: navigation by role, who is logged in, and logout. */
export function layout(
  title: string,
  session: Session | undefined,
  body: SafeHtml,
  options: { scripts?: string[] } = {},
): string {
  const p = session?.principal;
  const nav = p
    ? NAV.filter(
        (n) => (!n.staff || p.role !== 'user') && (!n.operator || p.role === 'operator'),
      ).map((n) => html`<a href="${n.href}">${n.label}</a>`)
    : [];
  const who = p
    ? html`<span class="who">${p.subject} · ${p.tenant} · <b>${p.role}</b></span>
        <form method="post" action="/logout" class="inline">
          <input type="hidden" name="csrf" value="${session.csrf}" />
          <button type="submit">Log out</button>
        </form>`
    : '';
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${title} · MCP gateway console</title>
        <link rel="stylesheet" href="/static/console.css" />
      </head>
      <body>
        <header>
          <strong>MCP gateway console</strong>
          <nav>${nav}</nav>
          ${who}
        </header>
        <main>
          <h1>${title}</h1>
          ${body}
        </main>
        ${(options.scripts ?? []).map((s) => html`<script src="${s}"></script>`)}
      </body>
    </html>`.value;
}

/** A list's export links: the same query as CSV and as JSON. */
export function exportLinks(path: string, query: Record<string, unknown>): SafeHtml {
  const link = (format: string) => {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (typeof v === 'string' && v && k !== 'format') params.set(k, v);
    }
    params.set('format', format);
    return `${path}?${params.toString()}`;
  };
  return html`<p class="exports">
    Export: <a href="${link('csv')}" data-export="csv">CSV</a> ·
    <a href="${link('json')}" data-export="json">JSON</a>
  </p>`;
}
