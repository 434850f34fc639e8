import { trustIssuer } from '@mtg/identity';
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
  const { keys, verify } = await trustIssuer(
    {
      issuer: config.issuer,
      jwksUri: config.AUTH_JWKS_URI,
      audience: config.resource,
      algorithms: config.AUTH_ALGORITHMS,
      clockToleranceSec: config.AUTH_CLOCK_TOLERANCE_SECONDS,
      requiredTyp: config.AUTH_REQUIRED_TYP,
      claims: config.claims,
    },
    logger,
  );
  const app = createCellRouter({
    resource: config.resource,
    cells,
    verify,
    tokenCacheMs: config.AUTH_TOKEN_CACHE_MS,
    keysReady: () => keys.ready(),
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
