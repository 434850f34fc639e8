import { Router, type Request, type Response } from 'express';
import { buildBundle } from '@mtg/audit';
import { principalOf, refuse, sessionOf } from '../http/guards.ts';
import { html } from '../http/html.ts';
import { describeIssues, EvidenceQuery } from '../http/parse-query.ts';
import { layout } from '../pages/layout.ts';
import type { AuditRouteDeps } from './audit-route-deps.ts';

/** Evidence bundles of the tenant for a month or a period. */
export function evidenceRoutes(deps: AuditRouteDeps): Router {
  const { pool, logger } = deps;
  const router = Router();
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
    // The month under way (UTC), the one an auditor most often asks for; the picker stops there.
    const month = deps.now().toISOString().slice(0, 7);
    const body = html`<p>
        An evidence bundle holds every event of tenant ${p.tenant} in the period, each with its
        hash, the chain links from the first of them to the first signed checkpoint after the last,
        and that checkpoint. Verify it anywhere, without the database:
        <code>npm run -s audit:verify -- --bundle FILE --keys JWKS_FILE</code> (docs/audit.md,
        "Evidence bundles").
      </p>
      <form method="get" action="/evidence" class="search">
        <input type="hidden" name="download" value="1" />
        <label>Month (UTC)<input type="month" name="month" value="${month}" max="${month}" /></label
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
