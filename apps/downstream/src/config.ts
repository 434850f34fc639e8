import { z } from 'zod';
import { port, url } from '@mtg/config';

/** The demo downstream system's environment. Parsed once in main.ts. */
export const downstreamConfigSchema = z
  .object({
    DOWNSTREAM_PORT: port(9500),
    DOWNSTREAM_HOST: z.string().min(1).default('127.0.0.1'),
    DATABASE_URL: z.string().min(1, 'is required (postgres://...)'),
    /** The role every connection runs as; DATABASE_URL's login must be a member of it only. */
    DATABASE_ROLE: z.string().min(1).default('mtg_downstream'),
    /** The authorization server whose tokens it accepts. */
    AUTH_ISSUER: url().optional(),
    IDP_ISSUER: url().optional(),
    /** Its JWKS; default `<issuer>/jwks` (the dev IdP's). */
    AUTH_JWKS_URI: url().optional(),
    /** The audience its tokens must carry; default http://127.0.0.1:$DOWNSTREAM_PORT. */
    DOWNSTREAM_RESOURCE: url().optional(),
    /** `enabled` mounts fault injection (POST /_faults, api/faults.ts): tests and chaos runs only. */
    DOWNSTREAM_FAULTS: z.enum(['enabled', 'disabled']).default('disabled'),
    LOG_LEVEL: z.enum(['error', 'warn', 'info', 'debug']).default('info'),
  })
  .transform((c) => {
    const issuer = c.AUTH_ISSUER ?? c.IDP_ISSUER ?? 'http://127.0.0.1:9400';
    return {
      ...c,
      issuer,
      jwksUri: c.AUTH_JWKS_URI ?? `${issuer.replace(/\/$/, '')}/jwks`,
      audience: c.DOWNSTREAM_RESOURCE ?? `http://127.0.0.1:${c.DOWNSTREAM_PORT}`,
    };
  });

export type DownstreamConfig = z.infer<typeof downstreamConfigSchema>;
