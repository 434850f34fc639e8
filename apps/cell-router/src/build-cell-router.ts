import { createKeySource, discoverJwksUriPatiently } from '@mtg/identity';
import type { Logger } from '@mtg/log';
import type { CellMap } from './cells-file.ts';
import type { CellRouterConfig } from './config.ts';
import { createCellRouter } from './create-router.ts';

export interface CellRouter {
  app: ReturnType<typeof createCellRouter>;
  close(): Promise<void>;
}

/** Wires the router from its config and its (already loaded) cells file: keys, then the app. */
export async function buildCellRouter(
  config: CellRouterConfig,
  cells: CellMap,
  logger: Logger,
): Promise<CellRouter> {
  const jwksUri = config.AUTH_JWKS_URI ?? (await discoverWithRetry(config.issuer, logger));
  const keys = createKeySource({
    jwksUri,
    onError: (error) => logger.warn('jwks refresh failed', { error: error.message }),
  });
  await keys.start();
  const app = createCellRouter({
    resource: config.resource,
    cells,
    verify: {
      keys: keys.getKey,
      issuer: config.issuer,
      audience: config.resource,
      algorithms: config.AUTH_ALGORITHMS,
      clockToleranceSec: config.AUTH_CLOCK_TOLERANCE_SECONDS,
      ...(config.AUTH_REQUIRED_TYP ? { requiredTyp: config.AUTH_REQUIRED_TYP as 'at+jwt' } : {}),
      claims: config.claims,
    },
    tokenCacheMs: config.AUTH_TOKEN_CACHE_MS,
    keysReady: keys.ready,
    logger,
    maxBodyBytes: config.MAX_BODY_BYTES,
    connectTimeoutMs: config.CELL_CONNECT_TIMEOUT_MS,
  });
  return {
    app,
    async close() {
      keys.stop();
      app.close();
    },
  };
}

function discoverWithRetry(issuer: string, logger: Logger): Promise<string> {
  return discoverJwksUriPatiently(issuer, (attempt, error) =>
    logger.warn('authorization server metadata not reachable yet', {
      issuer,
      attempt,
      error: error instanceof Error ? error.message : String(error),
    }),
  );
}
