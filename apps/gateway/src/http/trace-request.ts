import type { NextFunction, Request, Response } from 'express';
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { clipInput } from '@mtg/log';
import { noteRequestMeta } from './request-meta.ts';

const tracer = () => trace.getTracer('mcp-task-gateway');

/**
 * Each request is a SERVER span, continuing the caller's W3C `traceparent` when it sends one;
 * everything the request does (authentication, dispatch, the task's transaction, the job it
 * enqueues) runs inside it. The ids are noted for the request log line (request-meta.ts). With tracing
 * off the API hands out a no-op span and this costs a few property reads.
 */
export function traceRequests() {
  return (req: Request, res: Response, next: NextFunction) => {
    const parent = propagation.extract(ROOT_CONTEXT, req.headers);
    const span = tracer().startSpan(
      `${req.method} ${clipInput(req.path)}`,
      {
        kind: SpanKind.SERVER,
        attributes: { 'http.request.method': req.method, 'url.path': clipInput(req.path) },
      },
      parent,
    );
    const sc = span.spanContext();
    if (trace.isSpanContextValid(sc) && span.isRecording()) {
      noteRequestMeta(res, { traceId: sc.traceId, spanId: sc.spanId });
    }
    res.on('finish', () => {
      span.setAttribute('http.response.status_code', res.statusCode);
      if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    });
    context.with(trace.setSpan(parent, span), next);
  };
}

/** A middleware's work as a child span (authentication …), ended when it answers or passes on. */
export function traced(
  name: string,
  middleware: (req: Request, res: Response, next: NextFunction) => unknown,
) {
  return (req: Request, res: Response, next: NextFunction) => {
    const outer = context.active();
    const span = tracer().startSpan(name);
    let ended = false;
    const end = () => {
      if (!ended) span.end();
      ended = true;
    };
    res.once('finish', end);
    return context.with(trace.setSpan(context.active(), span), () =>
      middleware(req, res, (error?: unknown) => {
        end();
        // What follows is the request's, not a child of this step.
        context.with(outer, () => next(error));
      }),
    );
  };
}
