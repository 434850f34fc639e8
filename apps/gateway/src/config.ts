import { z } from 'zod';
import { toolLimitsOverrides } from '@mtg/tools';
import { csv, port, url, postgresUrl } from '@mtg/config';
import { STATUS_READ_AUDITS } from '@mtg/tasks';
import {
  checkCredentialKeys,
  claimMappingEnv,
  claimMappingFromConfig,
  credentialKeysEnv,
  credentialKeysFromConfig,
} from '@mtg/identity';

/** The gateway's environment. Parsed once in main.ts. */
export const gatewayConfigSchema = z
  .object({
    GATEWAY_PORT: port(3000),
    GATEWAY_HOST: z.string().min(1).default('127.0.0.1'),
    /** Canonical resource URL of the MCP endpoint: the audience tokens must carry. */
    GATEWAY_RESOURCE: url().optional(),
    DATABASE_URL: z.string().min(1, 'is required (postgres://...)'),
    DATABASE_ROLE: z.string().min(1).default('mtg_gateway'),
    /**
     * A hot standby of DATABASE_URL (same logins): task status reads, kept results and lists
     * go there while it is within DATABASE_READ_MAX_LAG_MS; unset: everything on the primary
     * (docs/scaling.md, "Read replicas").
     */
    DATABASE_READ_URL: postgresUrl().optional(),
    /**
     * A statement unanswered this long (ms) is given up and its connection dropped: a gateway
     * cut off from PostgreSQL answers 503 within this (or the 5 s connect timeout) instead of
     * hanging (docs/operations-resilience.md, "Database failover").
     */
    DATABASE_QUERY_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(5000),
    /**
     * Sessions the gateway keeps open to PostgreSQL at most (and to DATABASE_READ_URL). A
     * request holds one for a statement or one short transaction (docs/scaling.md, "Sessions
     * per process").
     */
    DATABASE_POOL_MAX: z.coerce.number().int().min(2).max(200).default(10),
    /** The replica is read only while at most this stale (ms); past it, the primary answers. */
    DATABASE_READ_MAX_LAG_MS: z.coerce.number().int().min(10).max(600_000).default(2000),
    /** The authorization server this gateway trusts. */
    AUTH_ISSUER: url().optional(),
    IDP_ISSUER: url().optional(),
    AUTH_JWKS_URI: url().optional(),
    AUTH_ALGORITHMS: csv().default(['ES256', 'RS256', 'PS256', 'EdDSA']),
    AUTH_CLOCK_TOLERANCE_SECONDS: z.coerce.number().int().min(0).max(300).default(30),
    /** `at+jwt` (RFC 9068) by default; empty to skip the typ check (Entra v1 tokens). */
    AUTH_REQUIRED_TYP: z.string().default('at+jwt'),
    /**
     * How long an access token that verified is taken on trust without checking its
     * signature again (never past its exp); 0 checks every request. Revocation, scopes and
     * ownership are checked on every request whatever this says.
     */
    AUTH_TOKEN_CACHE_MS: z.coerce.number().int().min(0).max(300_000).default(60_000),
    /** AUTH_PRESET, AUTH_CLAIM_*, AUTH_TENANT_FIXED (docs/identity.md). */
    ...claimMappingEnv,
    /**
     * OAuth clients of this deployment's own services: their tokens are refused (a worker must
     * not turn a task's delegation into a gateway token). CLIENT_ID is always one of them.
     */
    AUTH_SERVICE_CLIENTS: csv().default(['mcp-gateway', 'mcp-worker']),
    /** `refuse`: tokens with an RFC 8693 `act` claim (delegated to a service) get 401. */
    AUTH_DELEGATED_TOKENS: z.enum(['refuse', 'accept']).default('refuse'),
    /**
     * Browser origins allowed to call /mcp; requests without Origin always pass. An entry may
     * end in `:*` for any port. Unset: the loopback origins on any port when GATEWAY_HOST is a
     * loopback address, else MCP Inspector's origins (see defaultOrigins below).
     */
    ALLOWED_ORIGINS: csv().optional(),
    /** Host header names served (DNS-rebinding defence); the resource's host is added. */
    ALLOWED_HOSTS: csv().default(['127.0.0.1', 'localhost', '[::1]']),
    MAX_BODY_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .max(16 * 1024 * 1024)
      .default(1024 * 1024),
    /** Active (working or input_required) tasks allowed per user and per tenant. */
    MAX_ACTIVE_TASKS_PER_USER: z.coerce.number().int().min(1).default(20),
    MAX_ACTIVE_TASKS_PER_TENANT: z.coerce.number().int().min(1).default(500),
    /** How long a derived idempotency key keeps deduplicating after its task ended. */
    DERIVED_DEDUPE_WINDOW_MS: z.coerce
      .number()
      .int()
      .min(0)
      .default(10 * 60_000),
    TASK_POLL_INTERVAL_MS: z.coerce.number().int().min(100).default(1000),
    /**
     * Which status reads the audit trail records (docs/audit.md, "Status reads"):
     * `first-per-change`, the first read by each caller after each change of the task's
     * status; `all`, every read. Result reads and denials are always recorded.
     */
    STATUS_READ_AUDIT: z.enum(STATUS_READ_AUDITS).default('first-per-change'),
    /**
     * Removed: a random sample of reads told an auditor little about who looked when. Set,
     * whatever its value, it stops the gateway with what to set instead, rather than being
     * ignored by a deployment that relied on it.
     */
    STATUS_READ_AUDIT_SAMPLE_RATE: z
      .string()
      .optional()
      .refine((v) => v === undefined, {
        message:
          'was removed: set STATUS_READ_AUDIT=first-per-change (the default: the first read of each status by each caller) or STATUS_READ_AUDIT=all (every read)',
      }),
    /** Bound on how long a cancel waits for the worker's acknowledgement. */
    CANCEL_ACK_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(5000),
    /** How long a blocking tasks/result waits before asking the client to call again. */
    TASK_RESULT_WAIT_MS: z.coerce.number().int().min(1000).default(300_000),
    /** Blocking tasks/result calls one caller may hold open at once on a replica. */
    TASK_RESULT_WAITS_PER_CALLER: z.coerce.number().int().min(1).default(8),
    /** Per-tool limit overrides (JSON): retention, deadlines, delete-on-read, result size. */
    TOOL_LIMITS: toolLimitsOverrides.default({}),
    /** Tool packs to load (package names or paths); the same value for gateway and workers. */
    TOOL_PACKS: csv().default(['@mtg/demo-tools']),
    // --- Identity over time (docs/identity.md) ---
    /** This gateway's own OAuth client (token exchange for task-bound delegations). */
    CLIENT_ID: z.string().min(1).default('mcp-gateway'),
    CLIENT_SECRET: z
      .string()
      .min(
        1,
        'is required: the gateway exchanges user tokens for task-bound delegations as its own client',
      ),
    /** Audience of task-bound delegations: the worker service. */
    WORKER_RESOURCE: z.string().min(1).default('urn:mcp-task-gateway:worker'),
    /** Lifetime a delegation gets beyond the task deadline (for the final result write). */
    DELEGATION_GRACE_SECONDS: z.coerce.number().int().min(0).default(120),
    EXCHANGE_STYLE: z
      .enum(['rfc8693-resource', 'rfc8693-audience', 'entra-obo'])
      .default('rfc8693-resource'),
    /** AES-256-GCM key(s) for credentials at rest: CREDENTIAL_KEY (base64) or CREDENTIAL_KEYS "id:base64,…". */
    ...credentialKeysEnv,
    // --- Shared Signals receiver (RFC 8935) ---
    /** Issuer of the SETs we accept (the IdP acting as transmitter); defaults to the auth issuer. */
    SSF_TRANSMITTER_ISSUER: url().optional(),
    /** JWKS of the transmitter; defaults to the auth issuer's jwks_uri. */
    SSF_JWKS_URI: url().optional(),
    /** Expected Authorization header value on pushes (agreed at stream setup); optional. */
    SSF_PUSH_AUTH: z.string().min(1).optional(),
    /** SETs whose iat is older (or further in the future) than this are refused. */
    SSF_MAX_AGE_SECONDS: z.coerce.number().int().min(10).default(300),
    // --- Workload identity and per-tool policy ---
    /** Policy file (YAML or JSON) mapping workload identities to tools; unset = no policy. */
    POLICY_FILE: z.string().min(1).optional(),
    /** TLS: certificate, key and client-CA files; with a CA, client certificates are requested. */
    GATEWAY_TLS_CERT: z.string().min(1).optional(),
    GATEWAY_TLS_KEY: z.string().min(1).optional(),
    GATEWAY_TLS_CLIENT_CA: z.string().min(1).optional(),
    /** Proxies (IP addresses) whose forwarded client-certificate header is believed. */
    TRUSTED_PROXIES: csv().default([]),
    /** Header a trusted proxy puts the client certificate (PEM, URL-encoded) in. */
    FORWARDED_CERT_HEADER: z.string().min(1).default('x-forwarded-client-cert'),
    // --- Rate limits, shared by all replicas (docs/operations-resilience.md); 0 = off ---
    /** Task starts per user (tenant + subject) per minute. */
    RATE_LIMIT_STARTS_PER_MINUTE: z.coerce.number().int().min(0).default(6000),
    /** Task starts per OAuth client in one tenant (all its users there) per minute. */
    RATE_LIMIT_CLIENT_STARTS_PER_MINUTE: z.coerce.number().int().min(0).default(60_000),
    /** Task starts per tenant (all its clients and users) per minute. */
    RATE_LIMIT_TENANT_STARTS_PER_MINUTE: z.coerce.number().int().min(0).default(120_000),
    /** Status and result reads per caller (tenant + subject + client) per second. */
    RATE_LIMIT_POLLS_PER_SECOND: z.coerce.number().int().min(0).default(500),
    /** Proxied instant calls to upstreams per caller (tenant + subject + client) per minute. */
    RATE_LIMIT_UPSTREAM_CALLS_PER_MINUTE: z.coerce.number().int().min(0).default(600),
    /** Upstream MCP servers whose tools the gateway serves (YAML or JSON); unset: none. */
    UPSTREAMS_FILE: z.string().min(1).optional(),
    // --- Metrics ---
    /** Bearer token a scraper must present at GET /metrics; unset: loopback scrapers only. */
    METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
    LOG_LEVEL: z.enum(['error', 'warn', 'info', 'debug']).default('info'),
    /**
     * `off` sends polls (`tasks/get` of either wire, `get_job_status`), task starts and
     * 2025-11-25 `tasks/result` through the MCP SDKs like every other request, instead of the
     * gateway's own equivalent paths (mcp/fast-tasks-get.ts, mcp/fast-task-start.ts,
     * mcp/fast-tasks-result.ts): an escape hatch.
     */
    TASKS_GET_FAST_PATH: z.enum(['on', 'off']).default('on'),
  })
  .refine((c) => c.CREDENTIAL_KEY || c.CREDENTIAL_KEYS, {
    path: ['CREDENTIAL_KEY'],
    message: 'is required (base64 32-byte AES key), or CREDENTIAL_KEYS for rotation',
  })
  .superRefine(checkCredentialKeys)
  .transform((c) => {
    const resource = c.GATEWAY_RESOURCE ?? `http://127.0.0.1:${c.GATEWAY_PORT}/mcp`;
    const issuer = c.AUTH_ISSUER ?? c.IDP_ISSUER ?? 'http://127.0.0.1:9400';
    const resourceHost = new URL(resource).hostname;
    return {
      ...c,
      resource,
      issuer,
      allowedHosts: [...new Set([...c.ALLOWED_HOSTS, resourceHost])],
      serviceClients: [...new Set([...c.AUTH_SERVICE_CLIENTS, c.CLIENT_ID])],
      credentialKeys: credentialKeysFromConfig(c),
      claims: claimMappingFromConfig(c),
      allowedOrigins: c.ALLOWED_ORIGINS ?? defaultOrigins(c.GATEWAY_HOST),
    };
  });

/** Browser origins of pages served from this machine, on any port and either scheme. */
export const LOOPBACK_ORIGINS = ['localhost', '127.0.0.1', '[::1]'].flatMap((host) => [
  `http://${host}:*`,
  `https://${host}:*`,
]);

/**
 * A gateway listening on loopback can only be reached from this machine, so a page of this
 * machine (MCP Inspector, a local app, the MCP conformance suite) is its natural browser
 * client, whatever port it picked; every other origin is refused. A gateway listening
 * beyond loopback admits only MCP Inspector's origins unless ALLOWED_ORIGINS says more.
 */
function defaultOrigins(listenHost: string): string[] {
  return isLoopbackHost(listenHost)
    ? LOOPBACK_ORIGINS
    : ['http://localhost:6274', 'http://127.0.0.1:6274'];
}

function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h);
}

export type GatewayConfig = z.infer<typeof gatewayConfigSchema>;
