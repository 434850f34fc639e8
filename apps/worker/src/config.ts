import { z } from 'zod';

/** The worker's environment. Parsed once in main.ts. */
export const workerConfigSchema = z.object({
  DATABASE_URL: z.string().min(1, 'is required (postgres://...)'),
  /** The role every connection drops to (SET ROLE); production logs in as a member of it. */
  DATABASE_ROLE: z.string().min(1).default('mtg_worker'),
  /** Names this process in logs and job leases; default `worker-<pid>`. */
  WORKER_ID: z.string().min(1).optional(),
  LOG_LEVEL: z.enum(['error', 'warn', 'info', 'debug']).default('info'),
});

export type WorkerConfig = z.infer<typeof workerConfigSchema>;
