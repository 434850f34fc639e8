import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { clipInput, type Logger } from '@mtg/log';
import type { Cell } from './cells-file.ts';

const SAFE_ID = /^[A-Za-z0-9._:-]{1,100}$/;

/**
 * One correlation id per request (the caller's X-Request-Id when it is a safe token, else a
 * new one), sent on to the cell, which then logs and audits under the same id; and one log
 * line when the answer ends: the path and the routing, never a header or a body.
 */
export function correlateAndLog(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction) => {
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && SAFE_ID.test(incoming) ? incoming : randomUUID();
    req.headers['x-request-id'] = id;
    res.locals.correlationId = id;
    res.setHeader('X-Request-Id', id);
    const started = process.hrtime.bigint();
    res.once('close', () => {
      logger.info('request', {
        correlationId: id,
        method: req.method,
        path: clipInput(req.path),
        status: res.statusCode,
        ms: Number((process.hrtime.bigint() - started) / 1000n) / 1000,
        tenant: res.locals.tenant as string | undefined,
        cell: (res.locals.cell as Cell | undefined)?.name,
        complete: res.writableFinished,
      });
    });
    next();
  };
}
