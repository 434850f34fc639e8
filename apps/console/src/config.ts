import { z } from 'zod';
import { port, url, postgresUrl } from '@mtg/config';
import { credentialKeysEnv, credentialKeysFromConfig } from '@mtg/identity';

/** The console's environment (docs/console.md). Parsed once in main.ts. */
export const consoleConfigSchema = z
  .object({
    CONSOLE_PORT: port(9700),
    CONSOLE_HOST: z.string().min(1).default('127.0.0.1'),
    /** The address browsers use; the OAuth redirect URI is `<CONSOLE_URL>/auth/callback`. */
    CONSOLE_URL: url().optional(),
    /** A login that is a member of mtg_console only: the audit views, its sessions, the queues. */
    DATABASE_URL: z.string().min(1, 'is required (postgres://...)'),
    DATABASE_ROLE: z.string().min(1).default('mtg_console'),
    /**
     * AES-256-GCM key of the sessions at rest (base64, 32 bytes), the same on every replica;
     * or CONSOLE_SESSION_KEYS "id:base64,…" to rotate (the first seals, all open).
     */
    CONSOLE_SESSION_KEY: credentialKeysEnv.CREDENTIAL_KEY,
    CONSOLE_SESSION_KEYS: credentialKeysEnv.CREDENTIAL_KEYS,
    /** A session nobody used for this long ends (its token's expiry ends it anyway). */
    CONSOLE_SESSION_IDLE_SECONDS: z.coerce.number().int().min(60).max(86_400).default(1800),
    /**
     * A hot standby of DATABASE_URL (same logins) that the pages' queries read instead while
     * it is at most DATABASE_READ_MAX_LAG_MS stale (the sessions stay on DATABASE_URL);
     * unset: the primary (docs/scaling.md).
     */
    DATABASE_READ_URL: postgresUrl().optional(),
    DATABASE_READ_MAX_LAG_MS: z.coerce.number().int().min(10).max(600_000).default(2000),
    /** The authorization server people log in at. */
    AUTH_ISSUER: url().optional(),
    IDP_ISSUER: url().optional(),
    CONSOLE_CLIENT_ID: z.string().min(1).default('mcp-console'),
    /** Only for an IdP that registers the console as a confidential client. */
    CONSOLE_CLIENT_SECRET: z.string().min(1).optional(),
    /** The gateway's MCP endpoint: the audience of the console's tokens and where it acts. */
    GATEWAY_RESOURCE: url().optional(),
    GATEWAY_PORT: port(3000),
    /**
     * The Prometheus endpoints of the queues page, `name=url` comma-separated (e.g.
     * `gateway=http://127.0.0.1:3000/metrics,worker-1=http://127.0.0.1:9601/metrics`);
     * default: the gateway's /metrics.
     */
    CONSOLE_METRICS_URLS: z
      .string()
      .transform((s, ctx) => {
        const out: Array<{ name: string; url: string }> = [];
        for (const part of s
          .split(',')
          .map((p) => p.trim())
          .filter(Boolean)) {
          const eq = part.indexOf('=');
          const url = eq > 0 ? URL.parse(part.slice(eq + 1)) : null;
          if (!url || !/^https?:$/.test(url.protocol)) {
            ctx.addIssue({ code: 'custom', message: `${part} is not name=http(s)://…` });
            return z.NEVER;
          }
          out.push({ name: part.slice(0, eq), url: url.href });
        }
        return out;
      })
      .optional(),
    /**
     * The approval scopes (space-separated) an "approver" login asks for, so a second person
     * can decide four-eyes approvals on the approvals page; empty: no such login.
     */
    CONSOLE_APPROVAL_SCOPES: z.string().default('records:approve'),
    /** Bearer token those endpoints require (their METRICS_TOKEN); unset: loopback scrapes. */
    METRICS_TOKEN: z.string().min(1).optional(),
    /** Public keys of the checkpoint signing keys (JWKS file), for chain status. */
    AUDIT_JWKS_FILE: z.string().min(1).optional(),
    /** Where the development stack keeps its state (the dev checkpoint keys). */
    DATA_DIR: z.string().min(1).optional(),
    LOG_LEVEL: z.enum(['error', 'warn', 'info', 'debug']).default('info'),
  })
  .refine((c) => c.CONSOLE_SESSION_KEY || c.CONSOLE_SESSION_KEYS, {
    path: ['CONSOLE_SESSION_KEY'],
    message:
      'is required (base64 32-byte AES key, e.g. `openssl rand -base64 32`), or CONSOLE_SESSION_KEYS',
  })
  .transform((c) => ({
    ...c,
    sessionKeys: credentialKeysFromConfig({
      ...(c.CONSOLE_SESSION_KEY ? { CREDENTIAL_KEY: c.CONSOLE_SESSION_KEY } : {}),
      ...(c.CONSOLE_SESSION_KEYS ? { CREDENTIAL_KEYS: c.CONSOLE_SESSION_KEYS } : {}),
    }),
    issuer: c.AUTH_ISSUER ?? c.IDP_ISSUER ?? 'http://127.0.0.1:9400',
    gatewayResource: c.GATEWAY_RESOURCE ?? `http://127.0.0.1:${c.GATEWAY_PORT}/mcp`,
  }));

export type ConsoleConfig = z.infer<typeof consoleConfigSchema>;
