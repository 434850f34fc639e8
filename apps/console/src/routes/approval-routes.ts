import express, { Router, type Request, type Response } from 'express';
import { z } from 'zod';
import type { Logger } from '@mtg/log';
import type { GatewayActions } from '../actions/gateway-actions.ts';
import { principalOf, refuse, requireCsrf, sessionOf } from '../http/guards.ts';
import { html } from '../http/html.ts';
import { flashNotice, takeNotice } from '../http/notice.ts';
import { describeIssues } from '../http/parse-query.ts';
import type { SessionStore } from '../http/session-store.ts';
import { layout } from '../pages/layout.ts';

interface Approval {
  taskId: string;
  tool: string;
  owner: { subject: string; client: string };
  scope: string;
  reason: string;
  summary: Record<string, unknown>;
  arguments: Record<string, unknown>;
  requestedAt: string;
}

const Decision = z.object({
  csrf: z.string(),
  reason: z.string().trim().max(500).optional(),
});
const TASK_ID = /^[0-9a-f]{32}$/;

/**
 * Four-eyes approvals for a person who may give them: the gateway's list_approvals with the
 * person's own token, and approve / reject forms (CSRF-protected, like cancel) that call
 * approve_task / reject_task. The gateway decides who may decide what, and audits it: the
 * console holds no such right and shows only what the gateway answered.
 */
export function approvalRoutes(deps: {
  logger: Logger;
  actions: GatewayActions;
  sessions: SessionStore;
}): Router {
  const { logger, actions } = deps;
  const router = Router();

  router.get('/approvals', async (_req: Request, res: Response) => {
    const p = principalOf(res);
    const session = sessionOf(res);
    const notice = await takeNotice(deps.sessions, res);
    const r = await actions.callTool(p.accessToken, 'list_approvals', {});
    const approvals = r.ok ? ((r.structured.approvals ?? []) as Approval[]) : [];
    const row = (a: Approval) =>
      html`<tr class="approval" data-task="${a.taskId}">
        <td><a href="/tasks/${a.taskId}">${a.taskId}</a></td>
        <td>${a.tool}</td>
        <td>${a.owner.subject} (${a.owner.client})</td>
        <td>
          <code>${JSON.stringify(a.arguments)}</code><br /><code>${JSON.stringify(a.summary)}</code>
        </td>
        <td>${a.reason}</td>
        <td>${a.scope}</td>
        <td>
          <form method="post" action="/approvals/${a.taskId}/approve" class="inline">
            <input type="hidden" name="csrf" value="${session.csrf}" />
            <button type="submit" class="approve">Approve</button>
          </form>
          <form method="post" action="/approvals/${a.taskId}/reject" class="inline">
            <input type="hidden" name="csrf" value="${session.csrf}" />
            <input name="reason" placeholder="reason" maxlength="500" required />
            <button type="submit" class="reject">Reject</button>
          </form>
        </td>
      </tr>`;
    const body = html`${notice}
      <p>
        Tasks of other people in ${p.tenant} that wait for an approval you may give (a scope your
        token holds). You cannot approve your own. Every decision is made and audited by the
        gateway, as ${p.subject}.
      </p>
      ${r.ok ? '' : html`<p class="bad">The gateway did not answer: ${r.message}</p>`}
      ${
        approvals.length
          ? html`<table id="approvals">
              <thead>
                <tr>
                  <th>Task</th>
                  <th>Tool</th>
                  <th>Requested by</th>
                  <th>What</th>
                  <th>Reason</th>
                  <th>Scope</th>
                  <th></th>
                </tr>
              </thead>
              <tbody>
                ${approvals.map(row)}
              </tbody>
            </table>`
          : html`<p id="no-approvals">No approvals wait for you.</p>`
      }`;
    res.type('html').send(layout('Approvals', session, body));
  });

  for (const decision of ['approve', 'reject'] as const) {
    router.post(
      `/approvals/:id/${decision}`,
      express.urlencoded({ extended: false, limit: '4kb' }),
      requireCsrf(logger),
      async (req: Request, res: Response) => {
        const id = String(req.params.id);
        const parsed = Decision.safeParse(req.body);
        if (!parsed.success)
          return refuse(res, logger, 400, 'invalid_request', describeIssues(parsed.error));
        if (!TASK_ID.test(id)) return refuse(res, logger, 400, 'invalid_request', 'Task not found');
        if (decision === 'reject' && !parsed.data.reason)
          return refuse(res, logger, 400, 'invalid_request', 'A rejection needs a reason');
        const p = principalOf(res);
        const r = await actions.callTool(p.accessToken, `${decision}_task`, {
          taskId: id,
          ...(parsed.data.reason ? { reason: parsed.data.reason } : {}),
        });
        logger.info('approval decided in the console', {
          tenant: p.tenant,
          subject: p.subject,
          taskId: id,
          decision,
          ok: r.ok,
        });
        await flashNotice(
          deps.sessions,
          res,
          r.ok
            ? { kind: 'ok', text: `${decision === 'approve' ? 'Approved' : 'Rejected'} ${id}` }
            : { kind: 'bad', text: `Not done: ${r.message}` },
        );
        res.redirect(303, '/approvals');
      },
    );
  }
  return router;
}
