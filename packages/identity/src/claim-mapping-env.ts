import { z } from 'zod';
import { parseConfig } from '@mtg/config';
import {
  CLAIM_PRESETS,
  resolveClaimMapping,
  type ClaimMapping,
  type ClaimMappingOverrides,
  type ScopeClaim,
} from './claim-mapping.ts';

const entries = (s: string) =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);

/** "oid,sub" → ['oid', 'sub']; at least one name. */
const claimNames = () =>
  z.string().transform((s, ctx) => {
    const names = entries(s);
    if (names.length === 0 || names.some((n) => /\s/.test(n))) {
      ctx.addIssue({ code: 'custom', message: 'must be a comma-separated list of claim names' });
      return z.NEVER;
    }
    return names;
  });

/**
 * "scp:space,roles:array" → scope claims. The format is required and split off at the last
 * colon, so namespaced claims ("https://example.com/perms:array") work.
 */
const scopeClaims = () =>
  z.string().transform((s, ctx) => {
    const parsed: ScopeClaim[] = [];
    for (const entry of entries(s)) {
      const at = entry.lastIndexOf(':');
      const claim = entry.slice(0, at).trim();
      const format = entry.slice(at + 1).trim();
      if (at <= 0 || !claim || (format !== 'space' && format !== 'array')) {
        ctx.addIssue({
          code: 'custom',
          message: `"${entry}": expected <claim>:space or <claim>:array, comma-separated`,
        });
        return z.NEVER;
      }
      parsed.push({ claim, format });
    }
    if (parsed.length === 0) {
      ctx.addIssue({ code: 'custom', message: 'must name at least one scope claim' });
      return z.NEVER;
    }
    return parsed;
  });

/**
 * Environment variables for the claim mapping. Either call `claimMappingFromEnv(process.env)`,
 * or spread this into the app's config schema (`z.object({ ...claimMappingEnv, ... })`) and
 * call `claimMappingFromConfig(config)`.
 */
export const claimMappingEnv = {
  AUTH_PRESET: z.enum(CLAIM_PRESETS).default('default'),
  /** e.g. "oid,sub": first present claim wins. */
  AUTH_CLAIM_SUBJECT: claimNames().optional(),
  AUTH_CLAIM_TENANT: claimNames().optional(),
  /** One tenant for every token (single-tenant deployments of issuers without a tenant claim). */
  AUTH_TENANT_FIXED: z.string().trim().min(1).optional(),
  AUTH_CLAIM_CLIENT: claimNames().optional(),
  /** e.g. "scp:space,roles:array". */
  AUTH_CLAIM_SCOPES: scopeClaims().optional(),
};

const claimMappingEnvSchema = z.object(claimMappingEnv);
export type ClaimMappingEnv = z.output<typeof claimMappingEnvSchema>;

/**
 * The claim mapping the environment asks for. Throws ConfigError (from @mtg/config) naming
 * the variable at fault.
 */
export function claimMappingFromEnv(env: Record<string, string | undefined>): ClaimMapping {
  return claimMappingFromConfig(parseConfig(claimMappingEnvSchema, env));
}

/** The claim mapping of an already parsed config that includes `claimMappingEnv`. */
export function claimMappingFromConfig(config: ClaimMappingEnv): ClaimMapping {
  const overrides: ClaimMappingOverrides = {
    subject: config.AUTH_CLAIM_SUBJECT,
    client: config.AUTH_CLAIM_CLIENT,
    scopes: config.AUTH_CLAIM_SCOPES,
  };
  if (config.AUTH_CLAIM_TENANT) {
    overrides.tenant = { claim: config.AUTH_CLAIM_TENANT, fixed: config.AUTH_TENANT_FIXED };
  } else if (config.AUTH_TENANT_FIXED) {
    // A fixed tenant alone pins every token to it: the preset's tenant claim and realm
    // fallback are switched off rather than left to win over the pinned value.
    overrides.tenant = { claim: [], fromIssuerRealm: false, fixed: config.AUTH_TENANT_FIXED };
  }
  return resolveClaimMapping(config.AUTH_PRESET, overrides);
}
