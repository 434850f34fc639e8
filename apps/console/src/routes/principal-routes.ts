import express, { Router, type Request, type Response } from 'express';
import { z } from 'zod';
import { sendExport } from '../http/export.ts';
import {
  principalOf,
  readScopeOf,
  refuse,
  requireCsrf,
  requireRole,
  sessionOf,
} from '../http/guards.ts';
import { html } from '../http/html.ts';
import { listQuery } from '../http/list-query.ts';
import { flashNotice, takeNotice } from '../http/notice.ts';
import { describeIssues, PrincipalQuery } from '../http/parse-query.ts';
import { principalActivity, type ActivityRow } from '../queries/principal-activity.ts';
import { listRevocations, type RevocationRow } from '../queries/revocations.ts';
import { exportLinks, layout } from '../pages/layout.ts';
import { table } from '../pages/table.ts';
import type { AuditRouteDeps } from './audit-route-deps.ts';

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
  'note',
  'actor_subject',
  'actor_kind',
] as const;

const REVOCATION_LABELS: Record<(typeof REVOCATION_COLUMNS)[number], string> = {
  seq: 'Seq',
  occurred_at: 'When',
  type: 'Event',
  subject: 'Principal',
  reason: 'Via',
  note: 'Reason given',
  actor_subject: 'Actor',
  actor_kind: 'Actor kind',
};

const PrincipalAction = z.object({
  csrf: z.string(),
  subject: z.string().trim().min(1).max(256),
  reason: z.string().trim().max(500).optional(),
});

/** A principal's activity, the operator's revoke and restore, and the tenant's revocations. */
export function principalRoutes(deps: AuditRouteDeps): Router {
  const { pool, logger } = deps;
  const router = Router();
  router.get('/principals', async (req: Request, res: Response) => {
    const list = listQuery(req, res, logger, PrincipalQuery);
    if (!list) return;
    const { query, format } = list;
    const p = principalOf(res);
    const sub = query.sub;
    const rows = sub ? await principalActivity(pool, readScopeOf(p), sub) : [];
    if (format)
      return sendExport(res, format, `principal-${sub ?? ''}`, ACTIVITY_COLUMNS, rows as never);
    const notice = await takeNotice(deps.sessions, res);
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
              ${exportLinks('/principals', { sub })}${table<ActivityRow>(
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
        await flashNotice(
          deps.sessions,
          res,
          r.ok ? { kind: 'ok', text: r.detail } : { kind: 'bad', text: `Not done: ${r.message}` },
        );
        res.redirect(303, `/principals?sub=${encodeURIComponent(subject)}`);
      },
    );
  }

  router.get('/revocations', async (req: Request, res: Response) => {
    const list = listQuery(req, res, logger);
    if (!list) return;
    const { format } = list;
    const rows = await listRevocations(pool, readScopeOf(principalOf(res)));
    if (format) return sendExport(res, format, 'revocations', REVOCATION_COLUMNS, rows as never);
    const body = html`${exportLinks('/revocations', {})}${table<RevocationRow>(
      REVOCATION_COLUMNS.map((key) => ({ key, label: REVOCATION_LABELS[key] })),
      rows,
      'Nobody was revoked or restored.',
    )}`;
    res.type('html').send(layout('Revocations', sessionOf(res), body));
  });

  return router;
}
