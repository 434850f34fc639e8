import { Router, type Request, type Response } from 'express';
import { cellText } from '../http/export.ts';
import { sessionOf } from '../http/guards.ts';
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
    const h = await chainHealth(pool, await deps.keys(), deps.now);
    const v = h.verification;
    const verdict =
      'error' in v
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
            ${h.head ? `newest event at ${cellText(h.head.occurredAt)}, ${h.head.chains} chain(s)` : 'no events'}
          </td>
        </tr>
        <tr>
          <th>Latest checkpoint</th>
          <td>
            ${h.latestCheckpoint ? `${h.latestCheckpoint.heads} chain head(s), signed ${cellText(h.latestCheckpoint.signedAt)} (${age} min ago) by key ${h.latestCheckpoint.keyId}` : html`<span class="warn">none: run npm run -s audit:checkpoint</span>`}
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
        Each tenant has a chain of its own, and system events chain 0: this page shows the chains'
        shape, never another tenant's events.
      </p>
      <h2>Months</h2>
      ${table(
        [
          { key: 'partition', label: 'Partition' },
          { key: 'chains', label: 'Chains' },
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
