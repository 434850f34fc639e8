import type { NextFunction, Request, Response } from 'express';
import { appendAuditGrouped } from '@mtg/audit';
import { WINDOW_COUNT_CTE, type Pool } from '@mtg/db';
import type { Logger } from '@mtg/log';
import {
  revocationBeside,
  revocationFromRow,
  revocationOf,
  type PrincipalRevocationRow,
  type Revocation,
} from '@mtg/tasks';
import { principalOf, refuseToken } from './authenticate.ts';
import type { RateLimits } from './rate-limit.ts';
import { correlationIdOf } from './request-meta.ts';

export const REVOKED_DESCRIPTION = 'access for this principal has been revoked';

const DESCRIPTIONS: Record<Revocation, string> = {
  principal_revoked: REVOKED_DESCRIPTION,
  token_predates_revocation:
    'this token was issued before access for this principal was revoked; get a new token',
};

// A poll's count and its caller's revocation check in one round trip.
const REVOKED_WITH_POLL_COUNT = revocationBeside({
  sql: WINDOW_COUNT_CTE,
  name: 'counted',
  columns: ['points', 'expire'],
  firstParameter: 4,
});

/**
 * After authenticate: a principal the gateway was told to stop acting for (Shared Signals,
 * admin API) gets nothing, whatever its token says; once restored, only tokens issued after
 * the revocation are served. One primary-key lookup per request and
 * no cache, so a revocation holds from the moment it commits. A failed lookup fails closed
 * (the error handler answers 503 for an outage, 500 otherwise).
 *
 * With `polls` (the MCP route, after its body is parsed): a request that reads a task's
 * status or result has its poll counted in the same statement (RateLimits.countPollWithin),
 * and its verb spends that count — a poll's revocation check and rate limit are one round
 * trip instead of two. Neither is cached: both are read on the primary at each request.
 */
export function rejectRevoked(options: {
  pool: Pool;
  resourceMetadataUrl: string;
  logger: Logger;
  polls?: { limits: RateLimits; isPoll: (req: Request) => boolean };
}) {
  const refuse = (res: Response, description: string) =>
    refuseToken(res, options.resourceMetadataUrl, description);

  const check = async (req: Request, p: ReturnType<typeof principalOf>) => {
    const polls = options.polls;
    const row =
      polls?.isPoll(req) === true
        ? await polls.limits.countPollWithin<PrincipalRevocationRow & Record<string, unknown>>(
            p,
            REVOKED_WITH_POLL_COUNT,
            [p.tenant, p.subject],
          )
        : undefined;
    return row ? revocationFromRow(row, p) : revocationOf(options.pool, p);
  };

  return async (req: Request, res: Response, next: NextFunction) => {
    const p = principalOf(res);
    const correlationId = correlationIdOf(res);
    // (Identity claims that are not storable text never get here: token verification refuses them.)
    const revocation = await check(req, p);
    if (!revocation) return next();
    options.logger.info('revoked principal refused', {
      correlationId,
      tenant: p.tenant,
      subject: p.subject,
      reason: revocation,
    });
    await appendAuditGrouped(options.pool, {
      type: 'auth.denied',
      tenant: p.tenant,
      subject: p.subject,
      client: p.client,
      reason: revocation,
      ...(correlationId ? { correlationId } : {}),
      actor: { subject: p.subject, client: p.client, kind: 'user' },
      data: { method: req.method, path: req.path },
    });
    refuse(res, DESCRIPTIONS[revocation]);
  };
}
