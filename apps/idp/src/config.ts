import { z } from 'zod';
import { jsonRecord, port, url } from '@mtg/config';
import { STATIC_CLIENTS } from './clients.ts';

const absoluteUri = () =>
  z
    .string()
    .refine((v) => URL.canParse(v) && !v.includes('#'), 'must be an absolute URI without fragment');

const optionalPort = z.coerce.number().int().min(0).max(65535).optional();

/** The dev IdP's environment. Secrets fall back to the dev secrets file in main.ts. */
export const idpConfigSchema = z
  .object({
    IDP_PORT: port(9400),
    IDP_HOST: z.string().min(1).default('127.0.0.1'),
    /** Defaults to http://<host>:<bound port>. */
    IDP_ISSUER: url().optional(),
    DATA_DIR: z.string().min(1).optional(),
    IDP_CLIENT_SECRETS: jsonRecord().optional(),
    IDP_ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
    GATEWAY_PORT: optionalPort,
    DOWNSTREAM_PORT: optionalPort,
    GATEWAY_RESOURCE: absoluteUri().optional(),
    WORKER_RESOURCE: absoluteUri().default('urn:mcp-task-gateway:worker'),
    DOWNSTREAM_RESOURCE: absoluteUri().optional(),
    SSF_PUSH_URL: url().optional(),
    SSF_PUSH_AUTH: z.string().min(1).optional(),
    IDP_ACCESS_TOKEN_TTL: z.coerce.number().int().min(1).max(86400).default(3600),
  })
  .superRefine((env, ctx) => {
    if (env.IDP_CLIENT_SECRETS) {
      const missing = STATIC_CLIENTS.filter((c) => !env.IDP_CLIENT_SECRETS?.[c]);
      if (missing.length) {
        ctx.addIssue({
          code: 'custom',
          path: ['IDP_CLIENT_SECRETS'],
          message: `must hold a secret for ${missing.join(', ')}`,
        });
      }
    }
    if (env.SSF_PUSH_AUTH && !env.SSF_PUSH_URL) {
      ctx.addIssue({
        code: 'custom',
        path: ['SSF_PUSH_AUTH'],
        message: 'is set but SSF_PUSH_URL is not',
      });
    }
  })
  .transform((env) => ({
    ...env,
    // The contract's defaults follow the service ports.
    GATEWAY_RESOURCE: env.GATEWAY_RESOURCE ?? `http://127.0.0.1:${env.GATEWAY_PORT ?? 3000}/mcp`,
    DOWNSTREAM_RESOURCE:
      env.DOWNSTREAM_RESOURCE ?? `http://127.0.0.1:${env.DOWNSTREAM_PORT ?? 9500}`,
  }));

export type IdpConfig = z.infer<typeof idpConfigSchema>;
