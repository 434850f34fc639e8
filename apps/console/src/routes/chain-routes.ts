import { Router, type Request, type Response } from 'express';
import { cellText } from '../http/export.ts';
import { principalOf, sessionOf } from '../http/guards.ts';
import { html } from '../http/html.ts';
import { chainHealth } from '../queries/chain-health.ts';
import { layout } from '../pages/layout.ts';
import { table } from '../pages/table.ts';
import type { AuditRouteDeps } from './audit-route-deps.ts';

/** Chain health: verification from the latest checkpoint, head, checkpoint age, months. */
export function chainRoutes(deps: AuditRouteDeps): Router {
  const { pool } = deps;
  const router = Router();
  router.get('/chain', async (_req: Request, res: Response) => {
    const p = principalOf(res);
    const h = await chainHealth(pool, await deps.keys(), deps.now, p.tenant);
    const v = h.verification;
    const verdict =
      'empty' in v
        ? html`no events of ${p.tenant} yet`
        : 'error' in v
          ? html`<span class="bad">could not verify: ${v.error}</span>`
          : v.ok
            ? html`<span class="ok">intact</span>: ${v.events} events
                checked${v.anchor.seq > 0 ? ` from the checkpoint at event ${v.anchor.seq}` : ' from the start'},
                ${v.checkpoints.verified}/${v.checkpoints.total} checkpoints verified`
            : html`<span class="bad"
                  >BROKEN at event
                  ${v.failure ? `${v.failure.seq} of chain ${v.failure.chain}` : '?'}</span
                >: ${v.failures.length > 1 ? `(${v.failures.length} chains broken) ` : ''}
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
          <td>
            ${h.head ? `newest event of ${p.tenant} at ${cellText(h.head.occurredAt)}` : 'no events'}
          </td>
        </tr>
        <tr>
          <th>Latest checkpoint</th>
          <td>
            ${h.latestCheckpoint ? `${h.latestCheckpoint.heads ? `covers ${p.tenant}'s chain` : `does not cover ${p.tenant}'s chain yet`}, signed ${cellText(h.latestCheckpoint.signedAt)} (${age} min ago) by key ${h.latestCheckpoint.keyId}` : html`<span class="warn">none: run npm run -s audit:checkpoint</span>`}
          </td>
        </tr>
        <tr>
          <th>Not yet covered by a checkpoint</th>
          <td id="chain-uncovered">
            ${h.uncovered > 0 ? html`<span class="warn">${h.uncovered} event(s)</span>` : '0'}
          </td>
        </tr>
      </table>
      <p id="chain-scope">
        Tenant ${p.tenant} has a chain of its own: this page verifies and counts that chain only,
        never another tenant's. The whole trail (every chain, and chain 0 of system events) is
        verified with <code>npm run -s audit:verify</code>.
      </p>
      <h2>Months</h2>
      ${table(
        [
          { key: 'partition', label: 'Partition' },
          { key: 'events', label: 'Events' },
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

  return router;
}
