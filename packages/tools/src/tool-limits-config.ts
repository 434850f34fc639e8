import { z } from 'zod';

/** Per-tool overrides of LongToolLimits, e.g. `{"generate_report":{"deleteResultOnRead":true}}`. */
export const toolLimitsOverrides = z
  .string()
  .transform((s, ctx) => {
    try {
      return JSON.parse(s) as unknown;
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be JSON' });
      return z.NEVER;
    }
  })
  .pipe(
    z.record(
      z.string(),
      z
        .object({
          defaultDeadlineMs: z.number().int().positive(),
          maxDeadlineMs: z.number().int().positive(),
          retentionMs: z.number().int().positive(),
          deleteResultOnRead: z.boolean(),
          maxResultBytes: z.number().int().positive(),
          requireLiveUserEachStage: z.boolean(),
        })
        .partial()
        .strict(),
    ),
  );

export type ToolLimitsOverrides = z.infer<typeof toolLimitsOverrides>;
