import { z } from 'zod';
import { json } from '@mtg/config';

/** Per-tool overrides of LongToolLimits, e.g. `{"generate_report":{"deleteResultOnRead":true}}`. */
export const toolLimitsOverrides = json().pipe(
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
