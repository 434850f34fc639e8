import { createHash } from 'node:crypto';
import { defineLongTool } from '@mtg/tool-kit';
import { z } from 'zod';
import type { DemoConfig } from './index.ts';

const input = z
  .object({
    report: z
      .string()
      .min(1)
      .max(100)
      .regex(/^[\w.-]+$/, 'letters, digits, dot, dash, underscore'),
    rows: z
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .optional()
      .describe('Rows to include (default 1000)'),
  })
  .strict();
const CHUNKS = 3;

/**
 * Reads what it needs up front — the privileged read happens once, under the caller's
 * authority, at the start — then computes for a long time without touching downstream
 * systems again. (docs/identity.md: the "read up front" pattern.)
 */
export const generateReport = (config: DemoConfig) =>
  defineLongTool({
    name: 'generate_report',
    title: 'Generate a report',
    description: 'Reads the report source once, then computes the report. Runs as a durable task.',
    input,
    scope: 'reports:run',
    summarize: (a) => ({ report: a.report, rows: a.rows ?? 1000 }),
    async execute(ctx, args) {
      const rows = args.rows ?? 1000;
      const source = await ctx.step('read-source', async (signal) => {
        await ctx.sleep(config.DEMO_STEP_MS);
        return ctx
          .target('downstream')
          .get(`/api/reports/source?report=${encodeURIComponent(args.report)}&rows=${rows}`, {
            signal,
          });
      });
      await ctx.progress(1, CHUNKS + 1, 'source read');
      const hash = createHash('sha256').update(JSON.stringify(source));
      for (let i = 0; i < CHUNKS; i++) {
        const part = await ctx.step(`compute:${i}`, async () => {
          await ctx.sleep(config.DEMO_STEP_MS);
          return createHash('sha256')
            .update(`${args.report}:${rows}:${i}`)
            .digest('hex')
            .slice(0, 16);
        });
        hash.update(part);
        await ctx.progress(i + 2, CHUNKS + 1, `computed part ${i + 1} of ${CHUNKS}`);
      }
      return {
        report: args.report,
        rows,
        checksum: hash.digest('hex'),
        generatedFrom: String((source as { source?: string }).source ?? args.report),
      };
    },
  });
