import { z } from 'zod';
import { port, url } from '@mtg/config';

/** The console's environment (docs/console.md). Parsed once in main.ts. */
export const consoleConfigSchema = z
  .object({
    CONSOLE_PORT: port(9700),
    CONSOLE_HOST: z.string().min(1).default('127.0.0.1'),
    /** The address browsers use; the OAuth redirect URI is `<CONSOLE_URL>/auth/callback`. */
    CONSOLE_URL: url().optional(),
    /** A login that is a member of mtg_auditor only: the console reads the audit views. */
    DATABASE_URL: z.string().min(1, 'is required (postgres://...)'),
    DATABASE_ROLE: z.string().min(1).default('mtg_auditor'),
    /** The authorization server people log in at. */
    AUTH_ISSUER: url().optional(),
    IDP_ISSUER: url().optional(),
    CONSOLE_CLIENT_ID: z.string().min(1).default('mcp-console'),
    /** Only for an IdP that registers the console as a confidential client. */
    CONSOLE_CLIENT_SECRET: z.string().min(1).optional(),
    /** The gateway's MCP endpoint: the audience of the console's tokens and where it acts. */
    GATEWAY_RESOURCE: url().optional(),
    GATEWAY_PORT: port(3000),
    /** Public keys of the checkpoint signing keys (JWKS file), for chain status. */
    AUDIT_JWKS_FILE: z.string().min(1).optional(),
    LOG_LEVEL: z.enum(['error', 'warn', 'info', 'debug']).default('info'),
  })
  .transform((c) => ({
    ...c,
    issuer: c.AUTH_ISSUER ?? c.IDP_ISSUER ?? 'http://127.0.0.1:9400',
    gatewayResource: c.GATEWAY_RESOURCE ?? `http://127.0.0.1:${c.GATEWAY_PORT}/mcp`,
  }));

export type ConsoleConfig = z.infer<typeof consoleConfigSchema>;
