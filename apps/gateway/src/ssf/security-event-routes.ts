import { createHash, timingSafeEqual } from 'node:crypto';
import express, { Router, type NextFunction, type Request, type Response } from 'express';
import type { Pool } from '@mtg/db';
import type { Logger } from '@mtg/log';
import type { OnTaskEnded } from '@mtg/tasks';
import { actOnSecurityEvent } from './act-on-security-event.ts';
import { readSecurityEvent } from './read-security-event.ts';
import { forgetReceivedSet, pruneReceivedSets, recordReceivedSet } from './record-received-set.ts';
import { refuse, setErrorResponse, type SetErrorCode, type SetRefusal } from './set-errors.ts';
import {
  MAX_SET_LENGTH,
  verifySecurityEvent,
  type VerifySecurityEventOptions,
} from './verify-security-event.ts';

export const SSF_PUSH_PATH = '/ssf/events';

export interface SecurityEventReceiverOptions {
  verify: VerifySecurityEventOptions;
  /** The exact Authorization header value pushes must carry (agreed at stream setup); unset = none. */
  pushAuthorization?: string;
  /** Issuer of the access tokens this gateway accepts: `iss_sub` subjects must be its users. */
  subjectIssuer: string;
}

const digest = (value: string) => createHash('sha256').update(value).digest();

/** Constant-time whatever the lengths: both sides are hashed first. */
function headerMatches(given: string | undefined, expected: string): boolean {
  return timingSafeEqual(digest(given ?? ''), digest(expected)) && given !== undefined;
}

/**
 * The Shared Signals push receiver (RFC 8935): `POST /ssf/events` with one SET as
 * `application/secevent+jwt`. Answers 202 with an empty body once the SET is verified,
 * recorded and acted on, or 400 `{ err, description }`. Acting before answering means a 202
 * is a promise kept: the principal is already revoked when the transmitter hears back; if
 * acting fails, the jti is given back and the answer is a 500, so the transmitter delivers
 * again. A replayed jti (a retry, or a captured SET sent again) is answered 202 and changes
 * nothing (RFC 8935 §2.2: the SET was already accepted).
 */
export function securityEventRoutes(
  deps: SecurityEventReceiverOptions & {
    pool: Pool;
    logger: Logger;
    onTaskEnded?: OnTaskEnded;
    /** Told of each refused SET but our own outage (keys unavailable), to audit and count it. */
    onRefused?: (res: Response, refusal: Extract<SetRefusal, { code: SetErrorCode }>) => void;
  },
): Router {
  const { pool, logger } = deps;
  const router = Router();
  const readBody = express.text({ type: () => true, limit: MAX_SET_LENGTH });
  // jtis live well past the window in which a SET with the same jti could be accepted.
  const keepSeconds = 3 * deps.verify.maxAgeSeconds;
  let lastPruneAt = 0;

  const reject = (res: Response, refusal: SetRefusal) => {
    logger.warn('security event rejected', {
      correlationId: res.locals.correlationId as string | undefined,
      code: refusal.code,
      description: refusal.description,
    });
    if (refusal.code !== 'keys_unavailable') deps.onRefused?.(res, refusal);
    const answer = setErrorResponse(refusal);
    res.status(answer.status).set(answer.headers).json(answer.body);
  };

  router.post(
    SSF_PUSH_PATH,
    (req: Request, res: Response, next: NextFunction) => {
      res.set('Cache-Control', 'no-store');
      if (
        deps.pushAuthorization &&
        !headerMatches(req.get('authorization'), deps.pushAuthorization)
      ) {
        return reject(res, refuse('authentication_failed', 'the transmitter is not authenticated'));
      }
      if (!req.is('application/secevent+jwt')) {
        return reject(
          res,
          refuse('invalid_request', 'Content-Type must be application/secevent+jwt'),
        );
      }
      next();
    },
    readBody,
    async (req: Request, res: Response) => {
      const correlationId = res.locals.correlationId as string | undefined;
      const token = typeof req.body === 'string' ? req.body.trim() : '';
      const verified = await verifySecurityEvent(token, deps.verify);
      if (!verified.ok) return reject(res, verified);
      const { claims } = verified;
      const read = readSecurityEvent(claims, deps.subjectIssuer);
      if (!read.ok) return reject(res, read);
      const meta = {
        correlationId,
        iss: claims.iss,
        jti: claims.jti,
        events: Object.keys(claims.events),
      };

      if (!(await recordReceivedSet(pool, claims.iss, claims.jti))) {
        logger.info('security event already received; nothing done', meta);
        return res.status(202).end();
      }
      if (read.ignored.length)
        logger.info('security event types ignored', { ...meta, ignored: read.ignored });
      if (read.principal) {
        try {
          const acted = await actOnSecurityEvent(
            pool,
            logger,
            {
              principal: read.principal,
              actions: read.actions,
              jti: claims.jti,
              iss: claims.iss,
              ...(correlationId ? { correlationId } : {}),
            },
            deps.onTaskEnded ? { onTaskEnded: deps.onTaskEnded } : {},
          );
          logger.info('security event accepted', { ...meta, ...read.principal, acted });
        } catch (error) {
          logger.error('security event could not be acted on', {
            ...meta,
            error: error instanceof Error ? error.message : String(error),
          });
          await forgetReceivedSet(pool, claims.iss, claims.jti).catch((e: Error) =>
            logger.error(
              'could not give back the jti of an unprocessed SET; a redelivery will be taken for a replay',
              {
                ...meta,
                error: e.message,
              },
            ),
          );
          return res
            .status(500)
            .json({ description: 'the SET could not be processed; deliver it again' });
        }
      } else {
        logger.info('security event accepted; nothing to act on', meta);
      }
      res.status(202).end();

      if (Date.now() - lastPruneAt > deps.verify.maxAgeSeconds * 1000) {
        lastPruneAt = Date.now();
        pruneReceivedSets(pool, keepSeconds).catch((error: Error) =>
          logger.warn('pruning received SETs failed', { error: error.message }),
        );
      }
    },
  );
  router.all(SSF_PUSH_PATH, (_req: Request, res: Response) => {
    res.status(405).set('Allow', 'POST').json({ err: 'invalid_request', description: 'use POST' });
  });
  // Body-parser failures (too large, bad charset) are the transmitter's: a 400 invalid_request.
  router.use(
    SSF_PUSH_PATH,
    (error: Error & { status?: number }, _req: Request, res: Response, next: NextFunction) => {
      if (!error.status || error.status >= 500) return next(error);
      reject(
        res,
        refuse(
          'invalid_request',
          error.status === 413 ? 'the SET is too large' : 'the body could not be read',
        ),
      );
    },
  );
  return router;
}
