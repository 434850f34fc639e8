import { defineTool, ToolError } from '@mtg/tool-kit';
import { z } from 'zod';
import type { AcmeConfig } from './config.ts';

const PRICES: Record<string, number> = { WIDGET: 2.5, GADGET: 10, GIZMO: 42 };

export const quotePrice = (config: AcmeConfig) =>
  defineTool({
    name: 'acme_quote_price',
    title: 'Quote a price',
    description: 'Quotes the price of a quantity of one catalogue item (WIDGET, GADGET, GIZMO).',
    input: z.object({
      sku: z.string().min(1).max(32),
      quantity: z.number().int().min(1).max(1000),
    }),
    output: z.object({
      sku: z.string(),
      quantity: z.number(),
      total: z.number(),
      currency: z.string(),
    }),
    scope: 'invoices:sync',
    async run(ctx, { sku, quantity }) {
      const unit = PRICES[sku];
      if (unit === undefined) {
        throw new ToolError(
          'unknown_sku',
          `No catalogue item ${sku}; known: ${Object.keys(PRICES).join(', ')}`,
        );
      }
      ctx.logger.info('quoted', { sku, quantity });
      return { sku, quantity, total: unit * quantity, currency: config.ACME_CURRENCY };
    },
  });
