import { Router, type Request, type Response } from 'express';
import { sendExport } from '../http/export.ts';
import { principalOf, readScopeOf, sessionOf } from '../http/guards.ts';
import { html, SafeHtml } from '../http/html.ts';
import { listQuery } from '../http/list-query.ts';
import { DenialsQuery } from '../http/parse-query.ts';
import {
  denialsOverTime,
  listDenials,
  topDenied,
  type DenialRow,
  type TopEntry,
} from '../queries/denials.ts';
import { exportLinks, layout } from '../pages/layout.ts';
import { table } from '../pages/table.ts';
import type { AuditRouteDeps } from './audit-route-deps.ts';

const DENIAL_COLUMNS = [
  'seq',
  'occurred_at',
  'type',
  'reason',
  'subject',
  'client',
  'client_ip',
  'tool',
  'verb',
  'task_id',
] as const;

/** Every bucket label of the period, so the chart's time axis has no holes. */
function bucketsOf(period: { from: string; to: string }, unit: 'hour' | 'day'): string[] {
  const step = unit === 'hour' ? 3_600_000 : 86_400_000;
  const labels: string[] = [];
  const end = Date.parse(period.to);
  for (let t = Math.floor(Date.parse(period.from) / step) * step; t < end; t += step) {
    labels.push(new Date(t).toISOString().slice(0, 13) + ':00Z');
  }
  return labels;
}

/** Pages for auditors and operators: denials, principals, revocations, chain health, evidence. */

/** Denials over time by reason (a chart), the top denied, and the list. */
export function denialsRoutes(deps: AuditRouteDeps): Router {
  const { pool, logger } = deps;
  const router = Router();
  router.get('/denials', async (req: Request, res: Response) => {
    const list = listQuery(req, res, logger, DenialsQuery);
    if (!list) return;
    const { query, format } = list;
    const scope = readScopeOf(principalOf(res));
    const to = deps.now();
    const period = {
      from: new Date(to.getTime() - query.since.ms).toISOString(),
      to: new Date(to.getTime() + 1000).toISOString(),
    };
    const rows = await listDenials(pool, scope, period);
    if (format) return sendExport(res, format, 'denials', DENIAL_COLUMNS, rows as never);
    const unit = query.since.ms > 3 * 86_400_000 ? 'day' : 'hour';
    const series = await denialsOverTime(pool, scope, period, unit);
    const top = await topDenied(pool, scope, period);
    const topList = (title: string, entries: TopEntry[], id: string) =>
      html`<div>
        <h2>${title}</h2>
        ${table<TopEntry>(
          [
            { key: 'value', label: title.replace('Top ', '') },
            { key: 'count', label: 'Denials' },
          ],
          entries,
          'None.',
        )}<span id="${id}"></span>
      </div>`;
    const body = html` <form method="get" action="/denials" class="search">
        <label
          >Since<select name="since">
            ${['24h', '7d', '30d'].map((s) => html`<option ${query.since.text === s ? html`selected` : ''}>${s}</option>`)}
          </select></label
        >
        <button type="submit">Show</button>
      </form>
      <p>
        ${rows.length} denial(s) in tenant ${scope.tenant} from ${period.from} to ${period.to}, by
        reason:
      </p>
      <div class="chart">
        <canvas id="denials-chart" aria-label="Denials over time by reason"></canvas>
      </div>
      <script type="application/json" id="denials-data">
        ${new SafeHtml(
          JSON.stringify({ buckets: bucketsOf(period, unit), series }).replaceAll('<', '\\u003c'),
        )}
      </script>
      <div class="cols">
        ${topList('Top subjects', top.subjects, 'top-subjects')}${topList('Top clients', top.clients, 'top-clients')}${topList('Top client IPs', top.clientIps, 'top-ips')}
      </div>
      <h2>Denials</h2>
      ${exportLinks('/denials', req.query)}
      ${table<DenialRow>(
        DENIAL_COLUMNS.map((key) => ({
          key,
          label: key.replace('_', ' '),
          // The task the denied call named, when it is one of the tenant's: an unknown_task
          // denial names an id with no task behind it here.
          ...(key === 'task_id'
            ? {
                cell: (r: DenialRow) =>
                  r.task_id && r.reason !== 'unknown_task'
                    ? html`<a href="/tasks/${r.task_id}">${r.task_id}</a>`
                    : (r.task_id ?? ''),
              }
            : {}),
        })),
        rows,
        'No denial in this period.',
      )}`;
    res.type('html').send(
      layout('Denials', sessionOf(res), body, {
        scripts: ['/static/chart.umd.min.js', '/static/denials-chart.js'],
      }),
    );
  });

  return router;
}
