import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { clipInput, type Logger } from '@mtg/log';
import { maybeRequestContextOf } from './request-context.ts';

const SAFE_ID = /^[A-Za-z0-9._:-]{1,100}$/;

/**
 * Gives every request a correlation id (the caller's X-Request-Id when it is a safe token,
 * else a new UUID), echoes it, and writes one log line when the response finishes.
 */
export function correlateAndLog(logger: Logger) {
  return (req: Request, res: Response, next: NextFunction) => {
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && SAFE_ID.test(incoming) ? incoming : randomUUID();
    res.locals.correlationId = id;
    res.setHeader('X-Request-Id', id);
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const principal = maybeRequestContextOf(res)?.principal;
      const body = req.body as { method?: unknown } | undefined;
      logger.info('request', {
        correlationId: id,
        method: req.method,
        path: clipInput(req.path),
        status: res.statusCode,
        ms: Number((process.hrtime.bigint() - started) / 1000n) / 1000,
        rpc: body && typeof body.method === 'string' ? clipInput(body.method) : undefined,
        subject: principal?.subject,
        tenant: principal?.tenant,
        client: principal?.client,
        trace_id: res.locals.traceId as string | undefined,
        span_id: res.locals.spanId as string | undefined,
        clientIp: res.locals.clientIp as string | undefined,
        userAgent: res.locals.userAgent as string | undefined,
      });
    });
    next();
  };
}
