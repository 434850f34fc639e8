import { ConfigError, parseConfig } from '@mtg/config';
import { serveUntilSignalled } from '@mtg/http-serve';
import { createLogger } from '@mtg/log';
import { buildCellRouter } from './build-cell-router.ts';
import { CellsFileError, loadCells } from './cells-file.ts';
import { cellRouterConfigSchema } from './config.ts';

async function main() {
  let config;
  let cells;
  try {
    config = parseConfig(cellRouterConfigSchema, process.env);
    // The file before any connection: a bad CELLS_FILE is named before the IdP is asked.
    cells = loadCells(config.CELLS_FILE);
  } catch (error) {
    if (error instanceof ConfigError || error instanceof CellsFileError) {
      process.stderr.write(`cell-router: ${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
  const logger = createLogger('cell-router', { level: config.LOG_LEVEL });
  logger.info('cells loaded', {
    cells: cells.cells.map((c) => c.name),
    default: cells.default?.name ?? null,
  });
  const router = await buildCellRouter(config, cells, logger);
  await serveUntilSignalled(router.app, {
    port: config.CELL_ROUTER_PORT,
    host: config.CELL_ROUTER_HOST,
    logger,
    service: 'cell-router',
    url: config.resource,
    onClose: () => router.close(),
  });
}

main().catch((error) => {
  process.stderr.write(`cell-router: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
