import type { Response } from 'express';
import type { Cell } from './cells-file.ts';

/**
 * What the router learns of a request on its way through: its correlation id (correlateAndLog)
 * and, once routeByTenant verified the token, the tenant and the cell it goes to. Kept by
 * response with typed accessors, for the request log line and the proxy, rather than as
 * untyped `res.locals` entries.
 */
export interface RequestRoute {
  correlationId?: string;
  tenant?: string;
  cell?: Cell;
}

const routes = new WeakMap<Response, RequestRoute>();

/** Adds what a middleware learnt of the request to what is known of it. */
export function noteRequestRoute(res: Response, learnt: RequestRoute): void {
  routes.set(res, { ...routes.get(res), ...learnt });
}

/** What is known of the request so far (nothing, before correlateAndLog ran). */
export function requestRouteOf(res: Response): Readonly<RequestRoute> {
  return routes.get(res) ?? {};
}

/** The request's correlation id (undefined only on a router mounted without correlateAndLog). */
export function correlationIdOf(res: Response): string | undefined {
  return routes.get(res)?.correlationId;
}

/** The cell the request goes to; an error when read before routeByTenant chose one. */
export function cellOfRequest(res: Response): Cell {
  const cell = routes.get(res)?.cell;
  if (!cell) throw new Error('cell read before routeByTenant chose one');
  return cell;
}
