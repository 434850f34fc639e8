import type { Response } from 'express';

/**
 * What the first middlewares learn of a request before anyone authenticates it: its trace ids
 * (traceRequests), where it came from (recordClientOrigin) and its correlation id
 * (correlateAndLog), for the request log line, denials and audit rows. Kept by response, as
 * request-context.ts keeps the verified caller, so every reader gets a typed value instead of
 * an `any` out of `res.locals`.
 */
export interface RequestMeta {
  correlationId?: string;
  /** The client's address (RFC 7239-style: past our trusted proxies only). */
  clientIp?: string;
  userAgent?: string;
  traceId?: string;
  spanId?: string;
}

const metas = new WeakMap<Response, RequestMeta>();

/** Adds what a middleware learnt of the request to what is known of it. */
export function noteRequestMeta(res: Response, learnt: RequestMeta): void {
  metas.set(res, { ...metas.get(res), ...learnt });
}

/** What is known of the request so far (nothing, before the first middleware ran). */
export function requestMetaOf(res: Response): Readonly<RequestMeta> {
  return metas.get(res) ?? {};
}

/**
 * The request's correlation id. correlateAndLog runs before every route, so only a router
 * mounted without it (a unit test's) sees undefined.
 */
export function correlationIdOf(res: Response): string | undefined {
  return metas.get(res)?.correlationId;
}
