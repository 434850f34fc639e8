import express, { Router, type Request, type Response } from 'express';
import type { JSONWebKeySet } from 'jose';
import {
  buildBundle,
  describeStatusReadPolicy,
  readStatusReadPolicy,
  verifyBundle,
  type BundleReport,
} from '@mtg/audit';
import type { Pool } from '@mtg/db';
import type { Logger } from '@mtg/log';
import type { GatewayActions } from '../actions/gateway-actions.ts';
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
import type { SessionStore } from '../http/session-store.ts';
import { TaskSearchQuery } from '../http/parse-query.ts';
import { TASK_STATUSES } from '@mtg/tool-kit';
import { searchTasks, type TaskSummary } from '../queries/search-tasks.ts';
import { statusOfEvents } from '../queries/task-status.ts';
import { systemsTouched, taskTimeline, type TimelineEvent } from '../queries/task-timeline.ts';
import { exportLinks, layout } from '../pages/layout.ts';
import { table } from '../pages/table.ts';

const SEARCH_COLUMNS = [
  'task_id',
  'created_at',
  'last_event_at',
  'subject',
  'client',
  'tool',
  'status',
  'events',
] as const;
const TIMELINE_COLUMNS = [
  'seq',
  'occurred_at',
  'type',
  'actor_subject',
  'actor_kind',
  'subject',
  'client',
  'tool',
  'reason',
  'correlation_id',
  'data',
] as const;
const TASK_ID = /^[A-Za-z0-9_-]{1,128}$/;

export function taskRoutes(deps: {
  pool: Pool;
  logger: Logger;
  actions: GatewayActions;
  keys: () => Promise<JSONWebKeySet | undefined>;
  /** Where an action's outcome is kept for the next page. */
  sessions: SessionStore;
}): Router {
  const { pool, logger } = deps;
  const router = Router();

  router.get('/tasks', async (req: Request, res: Response) => {
    const p = principalOf(res);
    const list = listQuery(req, res, logger, TaskSearchQuery);
    if (!list) return;
    const { query: q, format } = list;
    const rows = await searchTasks(pool, readScopeOf(p), q);
    if (format) return sendExport(res, format, 'tasks', SEARCH_COLUMNS, rows as never);
    const field = (name: keyof typeof q, label: string) =>
      html`<label
        >${label}<input name="${name}" value="${(req.query[name] as string) ?? ''}"
      /></label>`;
    const body = html` <form method="get" action="/tasks" class="search">
        ${field('id', 'Task id')} ${p.role === 'user' ? '' : field('user', 'User')}
        ${field('client', 'Client')} ${field('tool', 'Tool')}
        <label
          >Status<select name="status">
            <option value="">any</option>
            ${TASK_STATUSES.map(
              (s) => html`<option ${q.status === s ? html`selected` : ''}>${s}</option>`,
            )}
          </select></label
        >
        <label
          >Created from (UTC)<input
            type="datetime-local"
            name="from"
            value="${(req.query.from as string) ?? ''}"
        /></label>
        <label
          >to<input type="datetime-local" name="to" value="${(req.query.to as string) ?? ''}"
        /></label>
        <button type="submit">Search</button>
      </form>
      ${p.role === 'user' ? html`<p>Your own tasks in ${p.tenant}.</p>` : html`<p>All tasks of tenant ${p.tenant}.</p>`}
      ${exportLinks('/tasks', req.query)}
      ${table<TaskSummary>(
        [
          {
            key: 'task_id',
            label: 'Task',
            cell: (r) => html`<a href="/tasks/${r.task_id}" class="task-link">${r.task_id}</a>`,
          },
          { key: 'created_at', label: 'Created' },
          { key: 'subject', label: 'User' },
          { key: 'client', label: 'Client' },
          { key: 'tool', label: 'Tool' },
          {
            key: 'status',
            label: 'Status',
            cell: (r) => html`<span class="status" data-status="${r.status}">${r.status}</span>`,
          },
          { key: 'events', label: 'Events' },
          { key: 'last_event_at', label: 'Last event' },
        ],
        rows,
        'No task matches.',
      )}`;
    res.type('html').send(layout('Tasks', sessionOf(res), body));
  });

  const loadTimeline = async (req: Request, res: Response) => {
    const p = principalOf(res);
    const id = String(req.params.id);
    const events = TASK_ID.test(id) ? await taskTimeline(pool, readScopeOf(p), id) : undefined;
    if (!events) {
      res
        .status(404)
        .type('html')
        .send(
          layout(
            'Task not found',
            sessionOf(res),
            html`<p class="bad">No task ${id} that you can see.</p>`,
          ),
        );
      return undefined;
    }
    return { id, events };
  };

  router.get('/tasks/:id', async (req: Request, res: Response) => {
    const list = listQuery(req, res, logger);
    if (!list) return;
    const { format } = list;
    const found = await loadTimeline(req, res);
    if (!found) return;
    const { id, events } = found;
    if (format) return sendExport(res, format, `task-${id}`, TIMELINE_COLUMNS, events as never);
    const p = principalOf(res);
    const session = sessionOf(res);
    const created = events.find((e) => e.type === 'task.created')!;
    const ended = [...events]
      .reverse()
      .find((e) => /^task\.(completed|failed|cancelled|admin_cancelled)$/.test(e.type));
    const denials = events.filter((e) => e.type === 'task.denied' || e.type === 'auth.denied');
    const identity = events.filter(
      (e) => e.type === 'task.delegated' || e.type === 'task.identity_refreshed',
    );
    const status = await chainStatus(id, p.tenant);
    // Without it, a timeline with one status read in a hundred polls reads as one poll.
    const statusReads = describeStatusReadPolicy(await readStatusReadPolicy(pool));
    const notice = await takeNotice(deps.sessions, res);
    const body = html` ${notice}
      <table class="facts">
        <tr>
          <th>Task</th>
          <td><code>${id}</code></td>
        </tr>
        <tr>
          <th>Tool</th>
          <td>${created.tool}</td>
        </tr>
        <tr>
          <th>Owner</th>
          <td>
            ${p.role === 'user' ? created.subject : html`<a href="/principals?sub=${encodeURIComponent(created.subject ?? '')}">${created.subject}</a>`}
            (client ${created.client})
          </td>
        </tr>
        <tr>
          <th>Status</th>
          <td id="task-status">${statusOfEvents(events.map((e) => e.type))}</td>
        </tr>
        <tr>
          <th>Systems touched</th>
          <td>${systemsTouched(events).join(', ') || '—'}</td>
        </tr>
        <tr>
          <th>Identity changes</th>
          <td>${identity.length}</td>
        </tr>
        <tr>
          <th>Denials against it</th>
          <td>${denials.length}</td>
        </tr>
        <tr>
          <th>Chain status</th>
          <td id="chain-status">${status}</td>
        </tr>
        <tr>
          <th>Status reads</th>
          <td id="status-read-policy">${statusReads}</td>
        </tr>
      </table>
      ${
        p.role === 'operator' && !ended
          ? html`<div class="actions">
              <form method="post" action="/tasks/${id}/cancel">
                <input type="hidden" name="csrf" value="${session.csrf}" />
                <button type="submit" id="cancel-task">Cancel this task</button> (as ${p.subject},
                through the gateway; audited)
              </form>
            </div>`
          : ''
      }
      ${p.role !== 'user' ? html`<p><a href="/tasks/${id}/bundle" id="task-bundle">Download the evidence bundle</a> (events, hashes and the signed checkpoint; verify with <code>npm run -s audit:verify -- --bundle FILE</code>)</p>` : ''}
      <h2>Timeline</h2>
      ${exportLinks(`/tasks/${id}`, {})}
      ${table<TimelineEvent>(
        [
          { key: 'seq', label: 'Seq' },
          { key: 'occurred_at', label: 'When' },
          {
            key: 'type',
            label: 'Event',
            cell: (e) => html`<span class="event-type">${e.type}</span>`,
          },
          {
            key: 'actor_subject',
            label: 'Actor',
            cell: (e) => `${e.actor_subject ?? ''}${e.actor_kind ? ` (${e.actor_kind})` : ''}`,
          },
          { key: 'subject', label: 'Subject' },
          { key: 'client', label: 'Client' },
          { key: 'reason', label: 'Reason' },
          {
            key: 'data',
            label: 'Details',
            cell: (e) => html`<code>${e.data ? JSON.stringify(e.data) : ''}</code>`,
          },
        ],
        events,
      )}`;
    res.type('html').send(layout(`Task ${id}`, session, body));
  });

  async function chainStatus(taskId: string, tenant: string) {
    const keys = await deps.keys();
    const client = await pool.connect();
    let report: BundleReport;
    try {
      const built = await buildBundle(
        client,
        { kind: 'task', taskId, tenant },
        { visibleTenant: tenant },
      );
      if (!built.ok) return html`<span class="warn">not checked here: ${built.message}</span>`;
      if (!keys)
        return html`<span class="warn"
          >not checked: no checkpoint public keys configured (AUDIT_JWKS_FILE)</span
        >`;
      report = await verifyBundle(built.bundle, keys);
    } finally {
      client.release();
    }
    if (report.ok && report.checkpoint) {
      return html`<span class="ok"
          >verified up to the checkpoint of ${report.checkpoint.signedAt}, signed by key
          ${report.checkpoint.keyId}</span
        >
        (events
        ${report.chains.map((c) => `${c.firstSeq}..${c.lastSeq} of chain ${c.chain}`).join(', ')})`;
    }
    if (report.failure?.code === 'no_checkpoint') {
      return html`<span class="warn"
        >hashes and links intact, but no signed checkpoint covers event ${report.failure.seq}
        yet</span
      >`;
    }
    return html`<span class="bad"
      >BROKEN at event ${report.failure?.seq} (${report.failure?.code}):
      ${report.failure?.message}</span
    >`;
  }

  router.get(
    '/tasks/:id/bundle',
    requireRole(logger, ['auditor', 'operator']),
    async (req: Request, res: Response) => {
      const found = await loadTimeline(req, res);
      if (!found) return;
      const p = principalOf(res);
      const client = await pool.connect();
      try {
        const built = await buildBundle(
          client,
          { kind: 'task', taskId: found.id, tenant: p.tenant },
          { visibleTenant: p.tenant },
        );
        if (!built.ok) return refuse(res, logger, 413, 'invalid_request', built.message);
        res.set('Content-Disposition', `attachment; filename="evidence-task-${found.id}.json"`);
        res.type('application/json').send(JSON.stringify(built.bundle, null, 2) + '\n');
      } finally {
        client.release();
      }
    },
  );

  router.post(
    '/tasks/:id/cancel',
    express.urlencoded({ extended: false, limit: '4kb' }),
    requireCsrf(logger),
    requireRole(logger, ['operator']),
    async (req: Request, res: Response) => {
      const found = await loadTimeline(req, res);
      if (!found) return;
      const p = principalOf(res);
      const r = await deps.actions.cancelTask(p.accessToken, found.id);
      logger.info('operator cancelled a task', {
        tenant: p.tenant,
        subject: p.subject,
        taskId: found.id,
        ok: r.ok,
      });
      await flashNotice(
        deps.sessions,
        res,
        r.ok
          ? { kind: 'ok', text: `Cancelled: ${r.detail}` }
          : { kind: 'bad', text: `Not cancelled: ${r.message}` },
      );
      res.redirect(303, `/tasks/${found.id}`);
    },
  );
  return router;
}
