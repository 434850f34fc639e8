import { z } from 'zod';
import { toolLimitsOverrides } from '@mtg/tools';
import { csv, url } from '@mtg/config';
import { checkCredentialKeys, credentialKeysEnv, credentialKeysFromConfig } from '@mtg/identity';

/** The worker's environment. Parsed once in main.ts. */
export const workerConfigSchema = z
  .object({
    DATABASE_URL: z.string().min(1, 'is required (postgres://...)'),
    DATABASE_ROLE: z.string().min(1).default('mtg_worker'),
    WORKER_ID: z.string().min(1).optional(),
    /** Tasks one worker process runs at once. */
    WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(200).default(20),
    /**
     * Sessions the worker keeps open to PostgreSQL at most; unset: WORKER_CONCURRENCY + 5, at
     * most 10. One is held by the maintenance leader's lock or a follower's wait for it; a
     * slot holds one for a statement or one short transaction, never across a step or a call
     * to a target (docs/scaling.md, "Sessions per process").
     */
    DATABASE_POOL_MAX: z.coerce.number().int().min(3).max(200).optional(),
    /** Lease length: a dead worker's task is picked up again after about this long. */
    WORKER_LEASE_MS: z.coerce.number().int().min(500).max(60_000).default(4000),
    /**
     * Safety poll of the served queues. Pickup does not wait for it: notifications wake one
     * worker at once, and the maintenance leader re-announces work left unfetched for a second.
     */
    WORKER_POLL_MS: z.coerce.number().int().min(100).default(30_000),
    WORKER_MAX_ATTEMPTS: z.coerce.number().int().min(1).default(10),
    SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).default(10_000),
    /** Tool packs to load (package names or paths); the same value as the gateway's. */
    TOOL_PACKS: csv().default(['@mtg/demo-tools']),
    /** The tools this worker runs (a worker pool); unset: every long tool of the packs. */
    WORKER_TOOLS: csv().optional(),
    /** Downstream targets (YAML or JSON); `downstream` defaults to DOWNSTREAM_URL. */
    TARGETS_FILE: z.string().min(1).optional(),
    /** Upstream MCP servers (the gateway's UPSTREAMS_FILE): their task-mode tools run here. */
    UPSTREAMS_FILE: z.string().min(1).optional(),
    AUTH_ISSUER: url().optional(),
    IDP_ISSUER: url().optional(),
    CLIENT_ID: z.string().min(1).default('mcp-worker'),
    CLIENT_SECRET: z
      .string()
      .min(1, 'is required: the worker authenticates to the IdP as its own client'),
    DOWNSTREAM_URL: url().default('http://127.0.0.1:9500'),
    DOWNSTREAM_RESOURCE: url().optional(),
    /** Per-tool limit overrides (JSON): retention, deadlines, delete-on-read, result size. */
    TOOL_LIMITS: toolLimitsOverrides.default({}),
    /** AES-256-GCM key(s) that open task delegations: CREDENTIAL_KEY or CREDENTIAL_KEYS. */
    ...credentialKeysEnv,
    EXCHANGE_STYLE: z
      .enum(['rfc8693-resource', 'rfc8693-audience', 'entra-obo'])
      .default('rfc8693-resource'),
    /** Lifetime of each downstream credential (a few minutes at most). */
    DOWNSTREAM_TOKEN_TTL_SECONDS: z.coerce.number().int().min(10).max(900).default(120),
    /**
     * A new stage reuses a downstream (or upstream) token obtained at most this long ago; 0:
     * a fresh exchange at every stage. Revocation still stops a task at its next boundary.
     */
    STAGE_TOKEN_REUSE_SECONDS: z.coerce.number().int().min(0).max(600).default(60),
    // --- Downstream protection (docs/operations-resilience.md) ---
    /** Each HTTP attempt to a downstream is abandoned after this long. */
    DOWNSTREAM_ATTEMPT_TIMEOUT_MS: z.coerce.number().int().min(50).max(300_000).default(10_000),
    /** Retries of a failed call (timeouts, no connection, 5xx/408/429) before the task waits. */
    DOWNSTREAM_RETRIES: z.coerce.number().int().min(0).max(10).default(3),
    /** Exponential backoff with decorrelated jitter between the attempts of a call. */
    DOWNSTREAM_BACKOFF_INITIAL_MS: z.coerce.number().int().min(1).default(200),
    DOWNSTREAM_BACKOFF_MAX_MS: z.coerce.number().int().min(1).default(5000),
    /** Consecutive transient failures that open a downstream's circuit (per worker process). */
    DOWNSTREAM_BREAKER_THRESHOLD: z.coerce.number().int().min(1).default(5),
    /** How long an open circuit holds calls back before one probe may go through. */
    DOWNSTREAM_BREAKER_COOLDOWN_MS: z.coerce.number().int().min(10).default(10_000),
    // --- Probes (always served) ---
    /** Port of `/healthz` and `/readyz`; 0: any free port (logged, and sent to the launcher). */
    WORKER_HEALTH_PORT: z.coerce.number().int().min(0).max(65_535).default(0),
    WORKER_HEALTH_HOST: z.string().min(1).default('127.0.0.1'),
    // --- Metrics ---
    /** Port of the worker's Prometheus endpoint (GET /metrics); 0: no endpoint. */
    WORKER_METRICS_PORT: z.coerce.number().int().min(0).max(65_535).default(0),
    WORKER_METRICS_HOST: z.string().min(1).default('127.0.0.1'),
    /** Bearer token a scraper must present; unset: loopback scrapers only. */
    METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
    LOG_LEVEL: z.enum(['error', 'warn', 'info', 'debug']).default('info'),
  })
  .refine((c) => c.CREDENTIAL_KEY || c.CREDENTIAL_KEYS, {
    path: ['CREDENTIAL_KEY'],
    message: 'is required (base64 32-byte AES key) to open task delegations, or CREDENTIAL_KEYS',
  })
  .superRefine(checkCredentialKeys)
  .transform((c) => ({
    ...c,
    workerId: c.WORKER_ID ?? `worker-${process.pid}`,
    issuer: c.AUTH_ISSUER ?? c.IDP_ISSUER ?? 'http://127.0.0.1:9400',
    downstreamResource: c.DOWNSTREAM_RESOURCE ?? c.DOWNSTREAM_URL.replace(/\/$/, ''),
    credentialKeys: credentialKeysFromConfig(c),
  }));

export type WorkerConfig = z.infer<typeof workerConfigSchema>;
