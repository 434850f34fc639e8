import { defineLongTool } from '@mtg/tool-kit';
import { z } from 'zod';
import type { DemoConfig } from './index.ts';

export const BATCH_SIZE = 500;

const input = z
  .object({
    collection: z
      .string()
      .min(1)
      .max(100)
      .regex(/^[\w.-]+$/, 'letters, digits, dot, dash, underscore'),
    count: z.number().int().min(1).max(100_000),
    patch: z
      .record(z.string(), z.unknown())
      .refine((p) => Object.keys(p).length > 0, 'patch must not be empty'),
  })
  .strict();
/**
 * Writes `count` records in batches of 500 (more than DEMO_APPROVAL_ABOVE only once a second
 * person approved); each batch is a step, so cancellation stops it
 * between batches and a resumed run continues with the first unwritten batch.
 */
export const bulkUpdateRecords = (config: DemoConfig) =>
  defineLongTool({
    name: 'bulk_update_records',
    title: 'Bulk update records',
    description: `Applies a patch to count records of a collection in batches of ${BATCH_SIZE}; cancellable between batches.`,
    input,
    scope: 'records:write',
    approvalScopes: ['records:approve'],
    // Patch values may be sensitive: audit and listings see only which fields change.
    summarize: (a) => ({
      collection: a.collection,
      count: a.count,
      patchFields: Object.keys(a.patch).slice(0, 50),
    }),
    async execute(ctx, args) {
      // docs/tools.md excerpts this block: four-eyes approval of a large change.
      if (args.count > config.DEMO_APPROVAL_ABOVE) {
        await ctx.approval({
          scope: 'records:approve',
          reason: `Changes ${args.count} records of ${args.collection} (more than ${config.DEMO_APPROVAL_ABOVE})`,
          summary: {
            collection: args.collection,
            count: args.count,
            patchFields: Object.keys(args.patch).slice(0, 50),
          },
        });
      }
      const batches = Math.ceil(args.count / BATCH_SIZE);
      let updated = 0;
      for (let i = 0; i < batches; i++) {
        const from = i * BATCH_SIZE;
        const to = Math.min(from + BATCH_SIZE, args.count);
        const r = await ctx.step(`batch:${i}`, async (signal) => {
          await ctx.sleep(config.DEMO_STEP_MS);
          await ctx
            .target('downstream')
            .post(
              `/api/collections/${args.collection}/records`,
              { from, to, patch: args.patch },
              { idempotencyKey: `${ctx.taskId}:batch:${i}`, signal },
            );
          return { from, to };
        });
        updated += r.to - r.from;
        await ctx.progress(
          i + 1,
          batches,
          `batch ${i + 1} of ${batches} written (${updated} records)`,
        );
      }
      return { collection: args.collection, updated, batches };
    },
  });
