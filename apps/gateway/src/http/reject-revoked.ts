import type { NextFunction, Request, Response } from 'express';
import { appendAuditGrouped } from '@mtg/audit';
import type { Pool } from '@mtg/db';
import type { Logger } from '@mtg/log';
import { revocationOf, type Revocation } from '@mtg/tasks';
import { principalOf, refuseToken } from './authenticate.ts';
import { correlationIdOf } from './request-meta.ts';

export const REVOKED_DESCRIPTION = 'access for this principal has been revoked';

const DESCRIPTIONS: Record<Revocation, string> = {
  principal_revoked: REVOKED_DESCRIPTION,
  token_predates_revocation:
    'this token was issued before access for this principal was revoked; get a new token',
};

/**
 * After authenticate: a principal the gateway was told to stop acting for (Shared Signals,
 * admin API) gets nothing, whatever its token says; once restored, only tokens issued after
 * the revocation are served. One primary-key lookup per request and
 * no cache, so a revocation holds from the moment it commits. A failed lookup fails closed
 * (the error handler answers 500).
 */
export function rejectRevoked(options: {
  pool: Pool;
  resourceMetadataUrl: string;
  logger: Logger;
}) {
  const refuse = (res: Response, description: string) =>
    refuseToken(res, options.resourceMetadataUrl, description);

  return async (req: Request, res: Response, next: NextFunction) => {
    const p = principalOf(res);
    const correlationId = correlationIdOf(res);
    // (Identity claims that are not storable text never get here: token verification refuses them.)
    const revocation = await revocationOf(options.pool, p);
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
