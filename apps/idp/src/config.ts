import { z } from 'zod';
import { json, jsonRecord, port, url } from '@mtg/config';
import { STATIC_CLIENTS } from './clients.ts';

const absoluteUri = () =>
  z
    .string()
    .refine((v) => URL.canParse(v) && !v.includes('#'), 'must be an absolute URI without fragment');

/** `{"mcp-worker": ["https://upstream.example/api", ...], ...}`: JSON, client → resources. */
const exchangeTargets = () =>
  json().pipe(
    z.record(
      z.string(),
      z.array(absoluteUri()),
      'must be a JSON object of client id → array of resource URIs',
    ),
  );

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
    /** Per client, the resources it may obtain by token exchange (docs/dev-idp.md). */
    IDP_EXCHANGE_TARGETS: exchangeTargets().optional(),
    IDP_ACCESS_TOKEN_TTL: z.coerce.number().int().min(1).max(86400).default(3600),
    /** The workers' targets (their audiences are resources here), as the workers read it. */
    TARGETS_FILE: z.string().min(1, 'must be a file path, or unset').optional(),
    /** Upstream MCP servers: their audiences and their tools' scopes, as the gateway reads it. */
    UPSTREAMS_FILE: z.string().min(1, 'must be a file path, or unset').optional(),
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
  }))
  .superRefine((env, ctx) => {
    const known = [env.GATEWAY_RESOURCE, env.WORKER_RESOURCE, env.DOWNSTREAM_RESOURCE];
    for (const [client, targets] of Object.entries(env.IDP_EXCHANGE_TARGETS ?? {})) {
      if (!(STATIC_CLIENTS as readonly string[]).includes(client))
        ctx.addIssue({
          code: 'custom',
          path: ['IDP_EXCHANGE_TARGETS'],
          message: `${client} is not one of ${STATIC_CLIENTS.join(', ')}`,
        });
      for (const target of targets) {
        if (!known.includes(target))
          ctx.addIssue({
            code: 'custom',
            path: ['IDP_EXCHANGE_TARGETS'],
            message: `${client}: ${target} is not one of ${known.join(', ')}`,
          });
      }
    }
  });

export type IdpConfig = z.infer<typeof idpConfigSchema>;
