import { z } from 'zod';
import { toolLimitsOverrides } from '@mtg/tools';
import { csv, port, url } from '@mtg/config';

/** The gateway's environment. Parsed once in main.ts. */
export const gatewayConfigSchema = z
  .object({
    GATEWAY_PORT: port(3000),
    GATEWAY_HOST: z.string().min(1).default('127.0.0.1'),
    /** Canonical resource URL of the MCP endpoint: the audience tokens must carry. */
    GATEWAY_RESOURCE: url().optional(),
    DATABASE_URL: z.string().min(1, 'is required (postgres://...)'),
    DATABASE_ROLE: z.string().min(1).default('mtg_gateway'),
    /** The authorization server this gateway trusts. */
    AUTH_ISSUER: url().optional(),
    IDP_ISSUER: url().optional(),
    AUTH_JWKS_URI: url().optional(),
    AUTH_ALGORITHMS: csv().default(['ES256', 'RS256', 'PS256', 'EdDSA']),
    AUTH_CLOCK_TOLERANCE_SECONDS: z.coerce.number().int().min(0).max(300).default(30),
    /** `at+jwt` (RFC 9068) by default; empty to skip the typ check (Entra v1 tokens). */
    AUTH_REQUIRED_TYP: z.string().default('at+jwt'),
    AUTH_PRESET: z.enum(['default', 'keycloak', 'auth0', 'entra', 'okta']).default('default'),
    AUTH_CLAIM_SUBJECT: csv().optional(),
    AUTH_CLAIM_TENANT: csv().optional(),
    AUTH_CLAIM_CLIENT: csv().optional(),
    AUTH_CLAIM_SCOPES: z.string().optional(),
    /** Browser origins allowed to call /mcp; requests without Origin always pass. */
    ALLOWED_ORIGINS: csv().default([
      'http://localhost:6274',
      'http://127.0.0.1:6274',
    ]),
    /** Host header names served (DNS-rebinding defence); the resource's host is added. */
    ALLOWED_HOSTS: csv().default(['127.0.0.1', 'localhost', '[::1]']),
    MAX_BODY_BYTES: z.coerce.number().int().min(1024).max(16 * 1024 * 1024).default(1024 * 1024),
    /** Active (working or input_required) tasks allowed per user and per tenant. */
    MAX_ACTIVE_TASKS_PER_USER: z.coerce.number().int().min(1).default(20),
    MAX_ACTIVE_TASKS_PER_TENANT: z.coerce.number().int().min(1).default(500),
    /** How long a derived idempotency key keeps deduplicating after its task ended. */
    DERIVED_DEDUPE_WINDOW_MS: z.coerce.number().int().min(0).default(10 * 60_000),
    TASK_POLL_INTERVAL_MS: z.coerce.number().int().min(100).default(1000),
    /** Fraction of status reads written to the audit trail (result reads are always). */
    STATUS_READ_AUDIT_SAMPLE_RATE: z.coerce.number().min(0).max(1).default(1),
    /** Bound on how long a cancel waits for the worker's acknowledgement. */
    CANCEL_ACK_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(5000),
    /** How long a blocking tasks/result waits before asking the client to call again. */
    TASK_RESULT_WAIT_MS: z.coerce.number().int().min(1000).default(300_000),
    /** Per-tool limit overrides (JSON): retention, deadlines, delete-on-read, result size. */
    TOOL_LIMITS: toolLimitsOverrides.default({}),
    LOG_LEVEL: z.enum(['error', 'warn', 'info', 'debug']).default('info'),
  })
  .transform((c) => {
    const resource = c.GATEWAY_RESOURCE ?? `http://127.0.0.1:${c.GATEWAY_PORT}/mcp`;
    const issuer = c.AUTH_ISSUER ?? c.IDP_ISSUER ?? 'http://127.0.0.1:9400';
    const resourceHost = new URL(resource).hostname;
    return {
      ...c,
      resource,
      issuer,
      allowedHosts: [...new Set([...c.ALLOWED_HOSTS, resourceHost])],
    };
  });

export type GatewayConfig = z.infer<typeof gatewayConfigSchema>;
