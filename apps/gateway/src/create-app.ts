import express, { type NextFunction, type Request, type Response } from 'express';
import type { Pool } from '@mtg/db';
import type { VerifyOptions } from '@mtg/identity';
import { metadataUrlsFor } from '@mtg/identity';
import type { Logger } from '@mtg/log';
import type { TaskService } from '@mtg/tasks';
import type { Catalogue, LongToolDefinition } from '@mtg/tools';
import { authenticate } from './http/authenticate.ts';
import { correlateAndLog } from './http/correlation.ts';
import { healthRoutes } from './http/health.ts';
import { RPC, sendRpcError } from './http/json-rpc-error.ts';
import { parseJsonRpc } from './http/parse-json-rpc.ts';
import { validateHost, validateOrigin } from './http/request-guards.ts';
import { requireToolScope } from './http/require-tool-scope.ts';
import { resourceMetadataRoutes } from './http/resource-metadata.ts';
import { createDispatch } from './mcp/dispatch.ts';
import { mcpEndpoint } from './mcp/mcp-endpoint.ts';

export interface GatewayDeps {
  resource: string;
  issuer: string;
  verify: Omit<VerifyOptions, 'now'>;
  keysReady: () => boolean;
  pool: Pool;
  catalogue: Catalogue;
  longTools: ReadonlyMap<string, LongToolDefinition>;
  tasks: TaskService;
  /** How long a blocking tasks/result waits for the task to end. */
  resultWaitMs: number;
  logger: Logger;
  allowedHosts: string[];
  allowedOrigins: string[];
  maxBodyBytes: number;
  scopesSupported: string[];
}

export function createApp(deps: GatewayDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  const resourceMetadataUrl = metadataUrlsFor(deps.resource)[0]!;
  const mcpPath = new URL(deps.resource).pathname;

  app.use(correlateAndLog(deps.logger));
  app.use(validateHost(deps.allowedHosts));
  app.use(healthRoutes({ pool: deps.pool, keysReady: deps.keysReady }));
  app.use(
    resourceMetadataRoutes({
      resource: deps.resource,
      issuer: deps.issuer,
      scopes: deps.scopesSupported,
    }),
  );
  app.all(
    mcpPath,
    validateOrigin(deps.allowedOrigins),
    authenticate({ verify: deps.verify, resourceMetadataUrl, logger: deps.logger }),
    ...parseJsonRpc(deps.maxBodyBytes),
    requireToolScope(deps.catalogue, deps.longTools, resourceMetadataUrl),
    mcpEndpoint(createDispatch(deps.catalogue, deps.longTools, deps.tasks), deps.logger, {
      resultWaitMs: deps.resultWaitMs,
    }),
  );

  app.use((_req: Request, res: Response) => {
    res.status(404).json({ error: 'not_found' });
  });
  // Last resort: a bug must not leak a stack trace or kill the process.
  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    deps.logger.error('unhandled', {
      correlationId: res.locals.correlationId,
      error: error instanceof Error ? error.message : String(error),
    });
    if (!res.headersSent) sendRpcError(res, 500, RPC.internalError, 'Internal error');
  });
  return app;
}
