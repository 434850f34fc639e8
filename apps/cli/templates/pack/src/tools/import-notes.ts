import { defineLongTool } from '@mtg/tool-kit';
import { z } from 'zod';
import type { Config } from '../config.ts';

const input = z.object({
  notebook: z.string().regex(/^[a-z0-9-]{1,40}$/, 'lower-case letters, digits and dashes'),
  batches: z.number().int().min(1).max(20),
});

/**
 * A long tool: a durable task in PostgreSQL. Each batch is a step: a crashed worker's task is
 * resumed by another at the first unfinished batch, and the idempotency key (task id + step)
 * makes a retried write land once.
 */
export const importNotes = (config: Config) =>
  defineLongTool({
    name: 'import_notes',
    title: 'Import notes',
    description: 'Imports a notebook into the downstream system, batch by batch.',
    input,
    scope: 'notes:write',
    limits: { defaultDeadlineMs: 10 * 60_000 },
    summarize: (a) => ({ notebook: a.notebook, batches: a.batches }),
    async execute(ctx, args) {
      const downstream = ctx.target('downstream');
      for (let batch = 1; batch <= args.batches; batch++) {
        await ctx.step(`batch:${batch}`, async (signal) => {
          await ctx.sleep(config.NOTES_BATCH_PAUSE_MS);
          await downstream.post(
            `/api/notebooks/${args.notebook}/batches`,
            { batch },
            { idempotencyKey: `${ctx.taskId}:batch:${batch}`, signal },
          );
          return { batch };
        });
        await ctx.progress(batch, args.batches, `batch ${batch} of ${args.batches} imported`);
      }
      return { notebook: args.notebook, batches: args.batches };
    },
  });
