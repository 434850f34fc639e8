import express, { Router, type Request, type Response } from 'express';
import type { JSONWebKeySet } from 'jose';
import { z } from 'zod';
import { buildBundle } from '@mtg/audit';
import type { Pool } from '@mtg/db';
import type { Logger } from '@mtg/log';
import type { GatewayActions } from '../actions/gateway-actions.ts';
import { cellText, exportFormatOf, sendExport } from '../http/export.ts';
import {
  principalOf,
  readScopeOf,
  refuse,
  requireCsrf,
  requireRole,
  sessionOf,
} from '../http/guards.ts';
import { html, SafeHtml } from '../http/html.ts';
import {
  DenialsQuery,
  describeIssues,
  EvidenceQuery,
  PrincipalQuery,
} from '../http/parse-query.ts';
import { chainHealth } from '../queries/chain-health.ts';
import {
  denialsOverTime,
  listDenials,
  topDenied,
  type DenialRow,
  type TopEntry,
} from '../queries/denials.ts';
import { principalActivity, type ActivityRow } from '../queries/principal-activity.ts';
import { listRevocations, type RevocationRow } from '../queries/revocations.ts';
import { exportLinks, layout } from '../pages/layout.ts';
import { table } from '../pages/table.ts';

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
const ACTIVITY_COLUMNS = [
  'seq',
  'occurred_at',
  'role',
  'type',
  'client',
  'tool',
  'task_id',
  'reason',
  'actor_subject',
] as const;
const REVOCATION_COLUMNS = [
  'seq',
  'occurred_at',
  'type',
  'subject',
  'reason',
  'actor_subject',
  'actor_kind',
] as const;

const PrincipalAction = z.object({
  csrf: z.string(),
  subject: z.string().trim().min(1).max(256),
  reason: z.string().trim().max(500).optional(),
});

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
export function auditRoutes(deps: {
  pool: Pool;
  logger: Logger;
  actions: GatewayActions;
  keys: () => Promise<JSONWebKeySet | undefined>;
  now: () => Date;
}): Router {
  const { pool, logger } = deps;
  const router = Router();
  router.use(
    ['/denials', '/principals', '/revocations', '/chain', '/evidence'],
    requireRole(logger, ['auditor', 'operator']),
  );

  router.get('/denials', async (req: Request, res: Response) => {
    const parsed = DenialsQuery.safeParse(req.query);
    const format = exportFormatOf(req.query.format);
    if (!parsed.success || format === 'invalid') {
      return refuse(
        res,
        logger,
        400,
        'invalid_request',
        parsed.success ? 'format must be csv or json' : describeIssues(parsed.error),
      );
    }
    const scope = readScopeOf(principalOf(res));
    const to = deps.now();
    const period = {
      from: new Date(to.getTime() - parsed.data.since.ms).toISOString(),
      to: new Date(to.getTime() + 1000).toISOString(),
    };
    const rows = await listDenials(pool, scope, period);
    if (format) return sendExport(res, format, 'denials', DENIAL_COLUMNS, rows as never);
    const unit = parsed.data.since.ms > 3 * 86_400_000 ? 'day' : 'hour';
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
            ${['24h', '7d', '30d'].map((s) => html`<option ${parsed.data.since.text === s ? html`selected` : ''}>${s}</option>`)}
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
        DENIAL_COLUMNS.map((key) => ({ key, label: key.replace('_', ' ') })),
        rows,
        'No denial in this period.',
      )}`;
    res.type('html').send(
      layout('Denials', sessionOf(res), body, {
        scripts: ['/static/chart.umd.min.js', '/static/denials-chart.js'],
      }),
    );
  });

  router.get('/principals', async (req: Request, res: Response) => {
    const parsed = PrincipalQuery.safeParse(req.query);
    const format = exportFormatOf(req.query.format);
    if (!parsed.success || format === 'invalid') {
      return refuse(
        res,
        logger,
        400,
        'invalid_request',
        parsed.success ? 'format must be csv or json' : describeIssues(parsed.error),
      );
    }
    const p = principalOf(res);
    const sub = parsed.data.sub;
    const rows = sub ? await principalActivity(pool, readScopeOf(p), sub) : [];
    if (format)
      return sendExport(res, format, `principal-${sub ?? ''}`, ACTIVITY_COLUMNS, rows as never);
    const notice =
      typeof req.query.done === 'string'
        ? html`<p class="ok" id="action-result">${req.query.done}</p>`
        : typeof req.query.failed === 'string'
          ? html`<p class="bad" id="action-result">${req.query.failed}</p>`
          : '';
    const actions = (action: 'revoke' | 'restore') =>
      html`<form method="post" action="/principals/${action}" class="inline">
        <input type="hidden" name="csrf" value="${sessionOf(res).csrf}" /><input
          type="hidden"
          name="subject"
          value="${sub ?? ''}"
        />
        <input name="reason" placeholder="reason" maxlength="500" />
        <button type="submit" id="${action}-principal">
          ${action === 'revoke' ? 'Revoke' : 'Restore'} ${sub}
        </button>
      </form>`;
    const body = html`${notice}
      <form method="get" action="/principals" class="search">
        <label>Principal (sub)<input name="sub" value="${sub ?? ''}" /></label
        ><button type="submit">Show activity</button>
      </form>
      ${sub && p.role === 'operator' ? html`<div class="actions">${actions('revoke')} ${actions('restore')} (through the gateway's admin API; audited)</div>` : ''}
      ${
        sub
          ? html`<h2>Activity of ${sub} in ${p.tenant}</h2>
              ${exportLinks('/principals', req.query)}${table<ActivityRow>(
                [
                  { key: 'seq', label: 'Seq' },
                  { key: 'occurred_at', label: 'When' },
                  { key: 'role', label: 'As' },
                  { key: 'type', label: 'Event' },
                  {
                    key: 'task_id',
                    label: 'Task',
                    cell: (r) =>
                      r.task_id ? html`<a href="/tasks/${r.task_id}">${r.task_id}</a>` : '',
                  },
                  { key: 'tool', label: 'Tool' },
                  { key: 'client', label: 'Client' },
                  { key: 'reason', label: 'Reason' },
                  { key: 'actor_subject', label: 'Actor' },
                ],
                rows,
                'No activity.',
              )}`
          : ''
      }`;
    res.type('html').send(layout('Principal activity', sessionOf(res), body));
  });

  for (const action of ['revoke', 'restore'] as const) {
    router.post(
      `/principals/${action}`,
      express.urlencoded({ extended: false, limit: '4kb' }),
      requireCsrf(logger),
      requireRole(logger, ['operator']),
      async (req: Request, res: Response) => {
        const parsed = PrincipalAction.safeParse(req.body);
        if (!parsed.success)
          return refuse(res, logger, 400, 'invalid_request', describeIssues(parsed.error));
        const p = principalOf(res);
        const { subject, reason } = parsed.data;
        const r = await deps.actions.principal(p.accessToken, action, subject, reason || undefined);
        const q = r.ok
          ? `done=${encodeURIComponent(r.detail)}`
          : `failed=${encodeURIComponent(`Not done: ${r.message}`)}`;
        res.redirect(303, `/principals?sub=${encodeURIComponent(subject)}&${q}`);
      },
    );
  }

  router.get('/revocations', async (req: Request, res: Response) => {
    const format = exportFormatOf(req.query.format);
    if (format === 'invalid')
      return refuse(res, logger, 400, 'invalid_request', 'format must be csv or json');
    const rows = await listRevocations(pool, readScopeOf(principalOf(res)));
    if (format) return sendExport(res, format, 'revocations', REVOCATION_COLUMNS, rows as never);
    const body = html`${exportLinks('/revocations', {})}${table<RevocationRow>(
      REVOCATION_COLUMNS.map((key) => ({ key, label: key.replace('_', ' ') })),
      rows,
      'Nobody was revoked or restored.',
    )}`;
    res.type('html').send(layout('Revocations', sessionOf(res), body));
  });

  router.get('/chain', async (_req: Request, res: Response) => {
    const h = await chainHealth(pool, await deps.keys(), deps.now);
    const v = h.verification;
    const verdict =
      'error' in v
        ? html`<span class="bad">could not verify: ${v.error}</span>`
        : v.ok
          ? html`<span class="ok">intact</span>: ${v.events} events
              checked${v.anchor.seq > 0 ? ` from the checkpoint at event ${v.anchor.seq}` : ' from the start'},
              ${v.checkpoints.verified}/${v.checkpoints.total} checkpoints verified`
          : html`<span class="bad">BROKEN at event ${v.failure?.seq ?? '?'}</span>:
              ${v.failure?.message ?? v.checkpointProblems.map((c) => c.message).join('; ')}`;
    const age = h.latestCheckpoint
      ? Math.round((h.checkedAt.getTime() - h.latestCheckpoint.signedAt.getTime()) / 60_000)
      : undefined;
    const body = html`<table class="facts">
        <tr>
          <th>Verification (${cellText(h.checkedAt)})</th>
          <td id="chain-verdict">${verdict}</td>
        </tr>
        <tr>
          <th>Head</th>
          <td>${h.head ? `event ${h.head.seq} at ${cellText(h.head.occurredAt)}` : 'no events'}</td>
        </tr>
        <tr>
          <th>Latest checkpoint</th>
          <td>
            ${h.latestCheckpoint ? `event ${h.latestCheckpoint.seq}, signed ${cellText(h.latestCheckpoint.signedAt)} (${age} min ago) by key ${h.latestCheckpoint.keyId}` : html`<span class="warn">none: run npm run -s audit:checkpoint</span>`}
          </td>
        </tr>
        <tr>
          <th>Not yet covered by a checkpoint</th>
          <td id="chain-uncovered">
            ${h.uncovered > 0 ? html`<span class="warn">${h.uncovered} event(s)</span>` : '0'}
          </td>
        </tr>
      </table>
      <p>
        The chain is shared by every tenant: this page shows its shape, never another tenant's
        events.
      </p>
      <h2>Months</h2>
      ${table(
        [
          { key: 'partition', label: 'Partition' },
          { key: 'first_seq', label: 'First seq' },
          { key: 'last_seq', label: 'Last seq' },
          {
            key: 'continuous',
            label: 'Continues the month before',
            cell: (r) => (r.continuous ? 'yes' : html`<span class="bad">gap</span>`),
          },
        ],
        h.partitions,
      )}`;
    res.type('html').send(layout('Chain health', sessionOf(res), body));
  });

  router.get('/evidence', async (req: Request, res: Response) => {
    const parsed = EvidenceQuery.safeParse(req.query);
    if (!parsed.success)
      return refuse(res, logger, 400, 'invalid_request', describeIssues(parsed.error));
    const p = principalOf(res);
    const q = parsed.data;
    if (q.download !== undefined) {
      let from = q.from;
      let to = q.to;
      if (q.month) {
        const [y, m] = q.month.split('-').map(Number) as [number, number];
        from = new Date(Date.UTC(y, m - 1, 1)).toISOString();
        to = new Date(Date.UTC(y, m, 1)).toISOString();
      }
      if (!from || !to || Date.parse(from) >= Date.parse(to)) {
        return refuse(
          res,
          logger,
          400,
          'invalid_request',
          'give a month, or a from and a to with from before to',
        );
      }
      const client = await pool.connect();
      try {
        const built = await buildBundle(
          client,
          { kind: 'range', tenant: p.tenant, from, to },
          { visibleTenant: p.tenant },
        );
        if (!built.ok) return refuse(res, logger, 413, 'invalid_request', built.message);
        res.set(
          'Content-Disposition',
          `attachment; filename="evidence-${p.tenant}-${q.month ?? from.slice(0, 10)}.json"`,
        );
        res.type('application/json').send(JSON.stringify(built.bundle, null, 2) + '\n');
      } finally {
        client.release();
      }
      return;
    }
    const body = html`<p>
        An evidence bundle holds every event of tenant ${p.tenant} in the period, each with its
        hash, the chain links from the first of them to the first signed checkpoint after the last,
        and that checkpoint. Verify it anywhere, without the database:
        <code>npm run -s audit:verify -- --bundle FILE --keys JWKS_FILE</code> (docs/audit.md,
        "Evidence bundles").
      </p>
      <form method="get" action="/evidence" class="search">
        <input type="hidden" name="download" value="1" />
        <label>Month<input type="month" name="month" /></label
        ><button type="submit" id="download-month">Download month</button>
      </form>
      <form method="get" action="/evidence" class="search">
        <input type="hidden" name="download" value="1" />
        <label>From (UTC)<input type="datetime-local" name="from" /></label
        ><label>To<input type="datetime-local" name="to" /></label
        ><button type="submit">Download period</button>
      </form>`;
    res.type('html').send(layout('Evidence', sessionOf(res), body));
  });
  return router;
}
