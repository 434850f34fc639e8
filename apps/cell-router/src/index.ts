export { buildCellRouter, type CellRouter } from './build-cell-router.ts';
export { cellRouterConfigSchema, type CellRouterConfig } from './config.ts';
export { CellsFileError, loadCells, parseCells, type Cell, type CellMap } from './cells-file.ts';
export { createCellRouter, type CellRouterDeps } from './create-router.ts';
