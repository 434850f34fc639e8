import express, { Router, type NextFunction, type Request, type Response } from 'express';
import type { Logger } from '@mtg/log';
import type { Cell } from './cells-file.ts';

/** The gateways' Shared Signals push receiver (RFC 8935), in every cell. */
export const SSF_PUSH_PATH = '/ssf/events';
// Far above a SET (a few hundred bytes); the cells refuse what they find too large.
const MAX_SET_BYTES = 64 * 1024;
// Below the transmitter's own bound on one push (the dev IdP's is 5 s).
const CELL_PUSH_TIMEOUT_MS = 4000;

type CellOutcome = { cell: string; status?: number; body?: string; error?: string };

/**
 * The revocation list is global: a principal disabled at the IdP must be refused in every
 * cell (its tenant lives in one, but the cell of a tenant may change, and a SET names no
 * cell). The IdP pushes to this one URL; the router delivers the SET, unchanged with its
 * Authorization header, to every cell's receiver at once, and answers:
 *
 * - 202 when every cell accepted it (each verified the signature itself: the router holds no
 *   key and believes nothing);
 * - when a cell could not take it now (unreachable, 5xx, timeout): 503 `{ err:
 *   "temporarily_unavailable", cells }`, so the transmitter delivers again; the cells that
 *   already accepted it answer a redelivery 202 and do nothing twice (each dedupes on the
 *   SET's jti);
 * - otherwise (every failing cell refused it, 4xx): the first refusal as that cell gave it,
 *   RFC 8935 `{ err, description }` — a SET one cell refuses is bad for all of them.
 */
export function securityEventFanOut(options: {
  cells: readonly Cell[];
  logger: Logger;
  fetch?: typeof fetch;
}): Router {
  const doFetch = options.fetch ?? fetch;
  const router = Router();
  const readBody = express.raw({ type: () => true, limit: MAX_SET_BYTES });

  const deliver = async (cell: Cell, req: Request, body: Buffer): Promise<CellOutcome> => {
    const headers: Record<string, string> = {
      'content-type': req.get('content-type') ?? 'application/secevent+jwt',
      accept: 'application/json',
    };
    const authorization = req.get('authorization');
    if (authorization) headers.authorization = authorization;
    try {
      const r = await doFetch(cell.url + SSF_PUSH_PATH, {
        method: 'POST',
        headers,
        body: new Uint8Array(body),
        signal: AbortSignal.timeout(CELL_PUSH_TIMEOUT_MS),
      });
      const text = await r.text().catch(() => '');
      return { cell: cell.name, status: r.status, body: text.slice(0, 2000) };
    } catch (error) {
      return {
        cell: cell.name,
        error: (error as Error).name === 'TimeoutError' ? 'timeout' : 'unreachable',
      };
    }
  };

  router.post(SSF_PUSH_PATH, readBody, async (req: Request, res: Response) => {
    res.set('Cache-Control', 'no-store');
    const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    const outcomes = await Promise.all(options.cells.map((cell) => deliver(cell, req, body)));
    const accepted = (o: CellOutcome) =>
      o.status !== undefined && o.status >= 200 && o.status < 300;
    const transient = (o: CellOutcome) => o.status === undefined || o.status >= 500;
    const summary = Object.fromEntries(outcomes.map((o) => [o.cell, o.status ?? o.error!]));
    const meta = { correlationId: res.locals.correlationId as string | undefined, cells: summary };
    if (outcomes.every(accepted)) {
      options.logger.info('security event delivered to every cell', meta);
      return res.status(202).end();
    }
    if (outcomes.some(transient)) {
      options.logger.warn(
        'security event not delivered to every cell; the transmitter must retry',
        meta,
      );
      return res.status(503).set('Retry-After', '5').json({
        err: 'temporarily_unavailable',
        description: 'not every cell accepted the SET; deliver it again',
        cells: summary,
      });
    }
    const refusal = outcomes.find((o) => !accepted(o))!;
    options.logger.warn('security event refused by a cell', meta);
    res
      .status(refusal.status!)
      .type('application/json')
      .send(refusal.body ?? '');
  });
  router.all(SSF_PUSH_PATH, (_req: Request, res: Response) => {
    res.status(405).set('Allow', 'POST').json({ err: 'invalid_request', description: 'use POST' });
  });
  router.use(
    SSF_PUSH_PATH,
    (error: Error & { status?: number }, _req: Request, res: Response, next: NextFunction) => {
      if (!error.status || error.status >= 500) return next(error);
      res.status(400).json({
        err: 'invalid_request',
        description: error.status === 413 ? 'the SET is too large' : 'the body could not be read',
      });
    },
  );
  return router;
}
