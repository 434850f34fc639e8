import type { NextFunction, Request, Response } from 'express';
import { appendAuditGrouped } from '@mtg/audit';
import { WINDOW_COUNT_CTE, type CountChain, type Pool } from '@mtg/db';
import type { Logger } from '@mtg/log';
import {
  ownedTaskOf,
  ownedTaskWithMark,
  revocationBeside,
  revocationFromRow,
  revocationOf,
  TASK_ID,
  type PrincipalRevocationRow,
  type Revocation,
} from '@mtg/tasks';
import { principalOf, refuseToken } from './authenticate.ts';
import type { RateLimits } from './rate-limit.ts';
import { correlationIdOf } from './request-meta.ts';
import { withPrefetchedTask } from './prefetched-task.ts';

export const REVOKED_DESCRIPTION = 'access for this principal has been revoked';

const DESCRIPTIONS: Record<Revocation, string> = {
  principal_revoked: REVOKED_DESCRIPTION,
  token_predates_revocation:
    'this token was issued before access for this principal was revoked; get a new token',
};

// A poll's count and its caller's revocation check in one round trip.
const POLL_COUNT = {
  sql: WINDOW_COUNT_CTE,
  name: 'counted',
  columns: ['points', 'expire'],
  firstParameter: 4,
};
const REVOKED_WITH_POLL_COUNT = revocationBeside(POLL_COUNT);
// And the task it polls ($6, the client $7), as its read verb would read it on the primary.
const REVOKED_WITH_POLL_COUNT_AND_TASK = revocationBeside({
  ...POLL_COUNT,
  lateral: ownedTaskWithMark({ id: 6, tenant: 4, client: 7 }),
});

// A start's counts (its limits' chain) and its caller's revocation check in one round trip;
// built once per chain length (countInTurnWithin keeps them).
const REVOKED_WITH_START_COUNTS = (chain: CountChain) => revocationBeside(chain);

type CountedRow = PrincipalRevocationRow & Record<string, unknown>;

/**
 * After authenticate: a principal the gateway was told to stop acting for (Shared Signals,
 * admin API) gets nothing, whatever its token says; once restored, only tokens issued after
 * the revocation are served. One primary-key lookup per request and
 * no cache, so a revocation holds from the moment it commits. A failed lookup fails closed
 * (the error handler answers 503 for an outage, 500 otherwise).
 *
 * With `counts` (the MCP route, after its body is parsed): a request that reads a task's
 * status or result has its poll counted in the same statement (RateLimits.countPollWithin),
 * and its verb spends that count — a poll's revocation check and rate limit are one round
 * trip instead of two. Neither is cached: both are read on the primary at each request.
 * The same statement reads the polled task as its verb would (owner, retention, the status
 * read mark), and the verb takes that row: a poll is one round trip. A task start has its
 * start limits counted the same way (RateLimits.countStartWithin): a start refused after
 * that, before its verb (its arguments, the tool policy), has spent its count.
 */
export function rejectRevoked(options: {
  pool: Pool;
  resourceMetadataUrl: string;
  logger: Logger;
  counts?: {
    limits: RateLimits;
    isPoll: (req: Request) => boolean;
    /** The task a poll reads, read in the same statement for its verb (prefetched-task.ts). */
    taskOf: (req: Request) => string | undefined;
    /** Whether the request starts a task on a path that reaches the start verb with it. */
    isStart: (req: Request) => boolean;
  };
}) {
  const refuse = (res: Response, description: string) =>
    refuseToken(res, options.resourceMetadataUrl, description);

  /** The caller's revocation, and a poll's task row read with it (for its verb to take). */
  const check = async (req: Request, p: ReturnType<typeof principalOf>) => {
    const counts = options.counts;
    if (counts?.isStart(req) === true) {
      const row = await counts.limits.countStartWithin<CountedRow>(p, REVOKED_WITH_START_COUNTS, [
        p.tenant,
        p.subject,
      ]);
      return { revocation: row ? revocationFromRow(row, p) : await revocationOf(options.pool, p) };
    }
    if (counts?.isPoll(req) !== true) return { revocation: await revocationOf(options.pool, p) };
    const polled = counts.taskOf(req);
    const taskId = polled !== undefined && TASK_ID.test(polled) ? polled : undefined;
    const row = taskId
      ? await counts.limits.countPollWithin<CountedRow>(p, REVOKED_WITH_POLL_COUNT_AND_TASK, [
          p.tenant,
          p.subject,
          taskId,
          p.client,
        ])
      : await counts.limits.countPollWithin<CountedRow>(p, REVOKED_WITH_POLL_COUNT, [
          p.tenant,
          p.subject,
        ]);
    if (!row) return { revocation: await revocationOf(options.pool, p) };
    const task = taskId ? ownedTaskOf(row) : undefined;
    return {
      revocation: revocationFromRow(row, p),
      prefetch: task && taskId ? { taskId, principal: p, row: task } : undefined,
    };
  };

  return async (req: Request, res: Response, next: NextFunction) => {
    const p = principalOf(res);
    const correlationId = correlationIdOf(res);
    // (Identity claims that are not storable text never get here: token verification refuses them.)
    const { revocation, prefetch } = await check(req, p);
    // The poll's read verb takes the row instead of reading it again (prefetched-task.ts).
    if (!revocation) return prefetch ? withPrefetchedTask(prefetch, next) : next();
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
