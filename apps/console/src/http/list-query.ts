import type { Request, Response } from 'express';
import { z } from 'zod';
import type { Logger } from '@mtg/log';
import { exportFormatOf, type ExportFormat } from './export.ts';
import { refuse } from './guards.ts';
import { describeIssues } from './parse-query.ts';

/** A list with no query of its own: only `format`. */
const NoQuery = z.object({ format: z.string().optional() });

/**
 * What every list route reads first: its query (parsed by `schema`) and the export format
 * (`format=csv|json`, or none for the page). Bad input is refused here with a 400 page
 * naming the field, and the route gets undefined and returns.
 */
export function listQuery<S extends z.ZodType = typeof NoQuery>(
  req: Request,
  res: Response,
  logger: Logger,
  schema?: S,
): { query: z.output<S>; format: ExportFormat | undefined } | undefined {
  const parsed = (schema ?? NoQuery).safeParse(req.query);
  const format = exportFormatOf(req.query.format);
  if (!parsed.success || format === 'invalid') {
    refuse(
      res,
      logger,
      400,
      'invalid_request',
      parsed.success ? 'format must be csv or json' : describeIssues(parsed.error),
    );
    return undefined;
  }
  return { query: parsed.data as z.output<S>, format };
}
