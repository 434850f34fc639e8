import { readFileSync } from 'node:fs';
import { parseDocument } from 'yaml';
import { z } from 'zod';

/**
 * Glossary
 * - cell: a complete deployment (gateway replicas, workers, one PostgreSQL primary) serving a
 *   set of tenants; here, the base URL of its gateways (their load balancer).
 * - cells file (CELLS_FILE): which cell serves which tenant, and the cell of every tenant not
 *   named (`default`, optional).
 */

const CELL_NAME = /^[a-z][a-z0-9-]{0,62}$/;

const cellSchema = z
  .object({
    /** Base URL of the cell's gateways; a request's path is appended to it. */
    url: z
      .url({ protocol: /^https?$/, error: 'must be an absolute http(s) URL' })
      .refine((u) => !new URL(u).search && !new URL(u).hash, 'must have no query or fragment'),
  })
  .strict();

export const cellsDocument = z
  .object({
    cells: z
      .record(z.string(), cellSchema)
      .refine((cells) => Object.keys(cells).length > 0, 'at least one cell'),
    /** Tenant → cell name. A tenant is the token's tenant claim, exactly. */
    tenants: z.record(z.string().min(1), z.string()).default({}),
    /** The cell of every tenant not in `tenants`; unset: such a tenant is refused (403). */
    default: z.string().optional(),
  })
  .strict()
  .superRefine((doc, ctx) => {
    for (const name of Object.keys(doc.cells)) {
      if (!CELL_NAME.test(name))
        ctx.addIssue({
          code: 'custom',
          path: ['cells', name],
          message: 'cell names: a-z, 0-9, - (at most 63, a letter first)',
        });
    }
    for (const [tenant, cell] of Object.entries(doc.tenants)) {
      if (!Object.hasOwn(doc.cells, cell))
        ctx.addIssue({
          code: 'custom',
          path: ['tenants', tenant],
          message: `names cell ${JSON.stringify(cell)}, which is not in cells`,
        });
    }
    if (doc.default !== undefined && !Object.hasOwn(doc.cells, doc.default))
      ctx.addIssue({
        code: 'custom',
        path: ['default'],
        message: `names cell ${JSON.stringify(doc.default)}, which is not in cells`,
      });
  });

export interface Cell {
  name: string;
  /** Base URL without a trailing slash. */
  url: string;
}

export interface CellMap {
  /** In file order: fan-outs go to each, discovery to `default` or else the first. */
  cells: Cell[];
  /** The cell serving `tenant`, or undefined when none does (and there is no default). */
  cellOf(tenant: string): Cell | undefined;
  default?: Cell;
}

export class CellsFileError extends Error {
  readonly code = 'invalid_cells_file';
  constructor(message: string) {
    super(message);
    this.name = 'CellsFileError';
  }
}

/** Validates a CELLS_FILE document (already read); throws naming the file and every problem. */
export function parseCells(raw: unknown, file: string): CellMap {
  const parsed = cellsDocument.safeParse(raw ?? {});
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((i) => `${i.path.map(String).join('.') || '(document)'}: ${i.message}`)
      .join('; ');
    throw new CellsFileError(`CELLS_FILE ${file}: ${problems}`);
  }
  const byName = new Map<string, Cell>(
    Object.entries(parsed.data.cells).map(([name, c]) => [
      name,
      { name, url: c.url.replace(/\/+$/, '') },
    ]),
  );
  const tenants = new Map(
    Object.entries(parsed.data.tenants).map(([tenant, cell]) => [tenant, byName.get(cell)!]),
  );
  const fallback = parsed.data.default === undefined ? undefined : byName.get(parsed.data.default);
  return {
    cells: [...byName.values()],
    cellOf: (tenant) => tenants.get(tenant) ?? fallback,
    ...(fallback ? { default: fallback } : {}),
  };
}

/** Reads CELLS_FILE (YAML or JSON; duplicate keys are an error, as a tenant named twice). */
export function loadCells(file: string): CellMap {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new CellsFileError(
      `CELLS_FILE ${file}: cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    );
  }
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0) {
    throw new CellsFileError(
      `CELLS_FILE ${file}: not YAML or JSON: ${doc.errors.map((e) => e.message.split('\n')[0]).join('; ')}`,
    );
  }
  return parseCells(doc.toJS({ maxAliasCount: 100 }), file);
}
