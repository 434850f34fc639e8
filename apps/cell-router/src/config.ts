import { z } from 'zod';
import { csv, port, url } from '@mtg/config';
import { claimMappingEnv, claimMappingFromConfig } from '@mtg/identity';

/** The edge router's environment. Parsed once in main.ts. */
export const cellRouterConfigSchema = z
  .object({
    CELL_ROUTER_PORT: port(3100),
    CELL_ROUTER_HOST: z.string().min(1).default('127.0.0.1'),
    /**
     * The public resource URL of the MCP endpoint, the one clients use and tokens are minted
     * for; every cell's GATEWAY_RESOURCE must be this same URL.
     */
    CELL_ROUTER_RESOURCE: url().optional(),
    /** Tenants → cells (YAML or JSON; docs/scaling.md, "Past one primary"). */
    CELLS_FILE: z.string().min(1, 'is required: the file mapping tenants to cells'),
    /** The authorization server whose tokens are routed (the one every cell trusts). */
    AUTH_ISSUER: url().optional(),
    IDP_ISSUER: url().optional(),
    AUTH_JWKS_URI: url().optional(),
    AUTH_ALGORITHMS: csv().default(['ES256', 'RS256', 'PS256', 'EdDSA']),
    AUTH_CLOCK_TOLERANCE_SECONDS: z.coerce.number().int().min(0).max(300).default(30),
    AUTH_REQUIRED_TYP: z.string().default('at+jwt'),
    /** As the gateway's: how long a verified token is remembered (0: every request). */
    AUTH_TOKEN_CACHE_MS: z.coerce.number().int().min(0).max(300_000).default(60_000),
    /** AUTH_PRESET, AUTH_CLAIM_*, AUTH_TENANT_FIXED: the cells' values (docs/identity.md). */
    ...claimMappingEnv,
    /** Larger request bodies get 413 here; the cells' MAX_BODY_BYTES should be the same. */
    MAX_BODY_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .max(16 * 1024 * 1024)
      .default(1024 * 1024),
    /** How long a cell may take to accept a connection before the request gets 503. */
    CELL_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(5000),
    LOG_LEVEL: z.enum(['error', 'warn', 'info', 'debug']).default('info'),
  })
  .transform((c) => ({
    ...c,
    resource: c.CELL_ROUTER_RESOURCE ?? `http://127.0.0.1:${c.CELL_ROUTER_PORT}/mcp`,
    issuer: c.AUTH_ISSUER ?? c.IDP_ISSUER ?? 'http://127.0.0.1:9400',
    claims: claimMappingFromConfig(c),
  }));

export type CellRouterConfig = z.infer<typeof cellRouterConfigSchema>;
