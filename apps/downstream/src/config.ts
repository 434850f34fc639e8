import { z } from 'zod';
import { port } from '@mtg/config';

/** The demo downstream system's environment. Parsed once in main.ts. */
export const downstreamConfigSchema = z.object({
  DOWNSTREAM_PORT: port(9500),
  DOWNSTREAM_HOST: z.string().min(1).default('127.0.0.1'),
  DATABASE_URL: z.string().min(1, 'is required (postgres://...)'),
  /** The role every connection drops to (SET ROLE); production logs in as a member of it. */
  DATABASE_ROLE: z.string().min(1).default('mtg_downstream'),
  LOG_LEVEL: z.enum(['error', 'warn', 'info', 'debug']).default('info'),
});

export type DownstreamConfig = z.infer<typeof downstreamConfigSchema>;
