import { z } from 'zod';

/** The pack's own environment variables, validated when the gateway or a worker starts. */
export const config = z.object({
  /** How long each batch of the long tool pauses, to be gentle with the downstream system. */
  NOTES_BATCH_PAUSE_MS: z.coerce.number().int().min(0).max(60_000).default(50),
});

export type Config = z.infer<typeof config>;
