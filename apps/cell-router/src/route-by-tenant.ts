import type { NextFunction, Request, Response } from 'express';
import { cachedTokenVerifier, extractBearer, type VerifyAccessTokenOptions } from '@mtg/identity';
import type { Logger } from '@mtg/log';
import { refuseBearer, sendRpcError, sendUnavailable } from './answers.ts';
import type { Cell, CellMap } from './cells-file.ts';

/** The cell the request goes to, set by routeByTenant. */
export function cellOfRequest(res: Response): Cell {
  return res.locals.cell as Cell;
}

/**
 * Picks the cell of a bearer-token request by the tenant claim of its token, after verifying
 * the token as the cells do (signature against the issuer's JWKS, issuer, audience = the
 * router's resource, expiry, type, claim mapping): a forged or foreign token picks no cell,
 * and no cell sees it. The cell then verifies it again and does everything else (revocation,
 * service clients, scopes, the task's owner); the router keeps no state about callers.
 */
export function routeByTenant(options: {
  cells: CellMap;
  verify: VerifyAccessTokenOptions;
  /** AUTH_TOKEN_CACHE_MS (0 or absent: every request is verified). */
  tokenCacheMs?: number;
  resourceMetadataUrl: string;
  logger: Logger;
}) {
  const verify = cachedTokenVerifier(options.verify, { maxAgeMs: options.tokenCacheMs ?? 0 });
  return async (req: Request, res: Response, next: NextFunction) => {
    const bearer = extractBearer(req.headers.authorization);
    if (!bearer.ok) return refuseBearer(res, options.resourceMetadataUrl, { code: bearer.code });
    const verified = await verify(bearer.token);
    if (!verified.ok) {
      options.logger.info('token rejected at the edge', {
        correlationId: res.locals.correlationId as string | undefined,
        code: verified.code,
      });
      if (verified.code === 'keys_unavailable')
        return sendUnavailable(res, 'signing keys of the authorization server are unavailable');
      return refuseBearer(res, options.resourceMetadataUrl, {
        code: 'invalid',
        description: verified.description,
      });
    }
    const { tenant } = verified.principal;
    const cell = options.cells.cellOf(tenant);
    res.locals.tenant = tenant;
    if (!cell) {
      options.logger.warn('no cell serves the tenant', {
        correlationId: res.locals.correlationId as string | undefined,
        tenant,
      });
      return sendRpcError(res, 403, 'Forbidden: no cell serves this tenant');
    }
    res.locals.cell = cell;
    next();
  };
}
