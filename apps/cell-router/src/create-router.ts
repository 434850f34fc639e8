import express, { type NextFunction, type Request, type Response } from 'express';
import { metadataUrlsFor, type VerifyAccessTokenOptions } from '@mtg/identity';
import { clipInput, type Logger } from '@mtg/log';
import { sendRpcError } from './answers.ts';
import type { CellMap } from './cells-file.ts';
import { correlateAndLog } from './correlate.ts';
import { securityEventFanOut } from './fan-out-security-event.ts';
import { healthRoutes } from './health.ts';
import { cellAgents, proxyToCell, type ProxyOptions } from './proxy-to-cell.ts';
import { cellOfRequest, routeByTenant } from './route-by-tenant.ts';

export interface CellRouterDeps {
  /** The public resource URL (the MCP endpoint clients use; every cell's GATEWAY_RESOURCE). */
  resource: string;
  cells: CellMap;
  verify: VerifyAccessTokenOptions;
  /** AUTH_TOKEN_CACHE_MS: how long a verified token is remembered. */
  tokenCacheMs?: number;
  keysReady: () => boolean;
  logger: Logger;
  maxBodyBytes: number;
  connectTimeoutMs: number;
  fetch?: typeof fetch;
}

/** The gateway routes a caller reaches with a bearer token: by tenant, to one cell. */
const ADMIN_PATH = '/admin/principals';
const RESOURCE_METADATA = '/.well-known/oauth-protected-resource';

/**
 * The edge router in front of N cells (docs/scaling.md, "Past one primary"): bearer-token
 * routes go to the cell of the token's tenant; the resource metadata comes from one cell
 * (every cell serves the same document, naming the router's URL); a Shared Signals push
 * goes to every cell.
 */
export function createCellRouter(deps: CellRouterDeps): express.Express & { close(): void } {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  const resourceMetadataUrl = metadataUrlsFor(deps.resource)[0]!;
  const mcpPath = new URL(deps.resource).pathname;
  const agents = cellAgents();
  const proxy: ProxyOptions = {
    logger: deps.logger,
    maxBodyBytes: deps.maxBodyBytes,
    connectTimeoutMs: deps.connectTimeoutMs,
    agents,
  };
  const toTenantsCell = [
    routeByTenant({
      cells: deps.cells,
      verify: deps.verify,
      ...(deps.tokenCacheMs !== undefined ? { tokenCacheMs: deps.tokenCacheMs } : {}),
      resourceMetadataUrl,
      logger: deps.logger,
    }),
    (req: Request, res: Response) => proxyToCell(req, res, cellOfRequest(res), proxy),
  ];
  const discoveryCell = deps.cells.default ?? deps.cells.cells[0]!;

  app.use(correlateAndLog(deps.logger));
  app.use(
    healthRoutes({
      cells: deps.cells.cells,
      keysReady: deps.keysReady,
      ...(deps.fetch ? { fetch: deps.fetch } : {}),
    }),
  );
  app.get([RESOURCE_METADATA, `${RESOURCE_METADATA}/*rest`], (req: Request, res: Response) => {
    res.locals.cell = discoveryCell;
    proxyToCell(req, res, discoveryCell, proxy);
  });
  app.use(
    securityEventFanOut({
      cells: deps.cells.cells,
      logger: deps.logger,
      ...(deps.fetch ? { fetch: deps.fetch } : {}),
    }),
  );
  app.all(mcpPath, ...toTenantsCell);
  app.all([ADMIN_PATH, `${ADMIN_PATH}/*rest`], ...toTenantsCell);

  app.use((_req: Request, res: Response) => {
    res.status(404).json({ error: 'not_found' });
  });
  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    deps.logger.error('unhandled', {
      correlationId: res.locals.correlationId as string | undefined,
      error: clipInput(error instanceof Error ? error.message : String(error)),
    });
    if (res.headersSent) return void res.destroy();
    sendRpcError(res, 500, 'Internal error');
  });
  return Object.assign(app, {
    close() {
      agents.http.destroy();
      agents.https.destroy();
    },
  });
}
