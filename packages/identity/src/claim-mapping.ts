import type { JWTPayload } from 'jose';

/** A claim holding scopes: an RFC 8693/9068 space-separated string, or a JSON array. */
export type ScopeClaim = { claim: string; format: 'space' | 'array' };

/**
 * Where the tenant comes from, tried in this order: the first present claim in `claim`,
 * then the realm name in a Keycloak issuer (`.../realms/<realm>`), then `fixed`.
 */
export type TenantMapping = { claim?: string[]; fromIssuerRealm?: boolean; fixed?: string };

/** Which token claims make up a principal. Issuers disagree (docs/identity.md, "Issuers and exchange styles"). */
export type ClaimMapping = {
  /** First present claim wins. */
  subject: string[];
  tenant: TenantMapping;
  /** First present claim wins. */
  client: string[];
  /** The union of all present claims; at least one must be present. */
  scopes: ScopeClaim[];
};

export const CLAIM_PRESETS = ['default', 'keycloak', 'auth0', 'entra', 'okta'] as const;
export type ClaimPreset = (typeof CLAIM_PRESETS)[number];

const PRESETS: Record<ClaimPreset, ClaimMapping> = {
  // The dev IdP (oidc-provider): `client_id` always, `azp` only when added.
  default: {
    subject: ['sub'],
    tenant: { claim: ['tenant'] },
    client: ['azp', 'client_id'],
    scopes: [{ claim: 'scope', format: 'space' }],
  },
  // One realm per tenant is the usual Keycloak layout; a `tenant` mapper wins when present.
  keycloak: {
    subject: ['sub'],
    tenant: { claim: ['tenant'], fromIssuerRealm: true },
    client: ['azp'],
    scopes: [{ claim: 'scope', format: 'space' }],
  },
  // `permissions` is what Auth0 RBAC ("Add Permissions in the Access Token") emits.
  auth0: {
    subject: ['sub'],
    tenant: { claim: ['org_id'] },
    client: ['azp', 'client_id'],
    scopes: [
      { claim: 'scope', format: 'space' },
      { claim: 'permissions', format: 'array' },
    ],
  },
  // `oid` is the user's stable id across apps (`sub` is pairwise per app); `appid` is v1.
  // App-only tokens carry `roles` and no `scp`.
  entra: {
    subject: ['oid', 'sub'],
    tenant: { claim: ['tid'] },
    client: ['azp', 'appid'],
    scopes: [
      { claim: 'scp', format: 'space' },
      { claim: 'roles', format: 'array' },
    ],
  },
  // Okta's `sub` is the login (often an email, can change); `uid` is the user id. Okta has
  // no tenant claim of its own: `tenant` is a custom claim, override it per deployment.
  okta: {
    subject: ['uid', 'sub'],
    tenant: { claim: ['tenant'] },
    client: ['cid'],
    scopes: [{ claim: 'scp', format: 'array' }],
  },
};

export type ClaimMappingOverrides = {
  subject?: string[];
  /** Merged over the preset's tenant mapping (so Keycloak keeps its realm fallback). */
  tenant?: TenantMapping;
  client?: string[];
  scopes?: ScopeClaim[];
};

/**
 * The mapping for a preset with per-deployment overrides applied. Throws TypeError for a
 * mapping that could never produce a principal (an empty list, no tenant source).
 */
export function resolveClaimMapping(
  preset: ClaimPreset,
  overrides: ClaimMappingOverrides = {},
): ClaimMapping {
  const base = PRESETS[preset];
  if (!base) throw new TypeError(`unknown claim preset "${String(preset)}"`);
  const mapping: ClaimMapping = {
    subject: [...(overrides.subject ?? base.subject)],
    tenant: { ...base.tenant, ...definedOnly(overrides.tenant ?? {}) },
    client: [...(overrides.client ?? base.client)],
    scopes: (overrides.scopes ?? base.scopes).map((s) => ({ ...s })),
  };
  for (const key of ['subject', 'client', 'scopes'] as const) {
    if (mapping[key].length === 0) throw new TypeError(`claim mapping: ${key} names no claim`);
  }
  const { claim, fromIssuerRealm, fixed } = mapping.tenant;
  if (!claim?.length && !fromIssuerRealm && !fixed) {
    throw new TypeError('claim mapping: tenant has no source (claim, fromIssuerRealm or fixed)');
  }
  return mapping;
}

const definedOnly = <T extends object>(o: T): Partial<T> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;

export type MappedClaims = { subject: string; tenant: string; client: string; scopes: string[] };

export type MapClaimsResult =
  | ({ ok: true } & MappedClaims)
  | { ok: false; code: 'claim_missing' | 'malformed'; description: string };

const quoted = (names: readonly string[]) => names.map((n) => `"${n}"`).join(' or ');

/** Reads subject, tenant, client and scopes out of a verified claims set. */
export function mapClaims(claims: JWTPayload, mapping: ClaimMapping): MapClaimsResult {
  const subject = firstString(claims, mapping.subject, 'subject');
  if (!subject.ok) return subject;
  const tenant = tenantOf(claims, mapping.tenant);
  if (!tenant.ok) return tenant;
  const client = firstString(claims, mapping.client, 'client');
  if (!client.ok) return client;
  const scopes = scopesOf(claims, mapping.scopes);
  if (!scopes.ok) return scopes;
  return {
    ok: true,
    subject: subject.value,
    tenant: tenant.value,
    client: client.value,
    scopes: scopes.value,
  };
}

type Read<T> =
  { ok: true; value: T } | { ok: false; code: 'claim_missing' | 'malformed'; description: string };

function firstString(claims: JWTPayload, names: readonly string[], role: string): Read<string> {
  for (const name of names) {
    const value = claims[name];
    if (value === undefined || value === null) continue;
    // A present claim of the wrong shape is not skipped: falling through to the next claim
    // would let a token choose which claim identifies it.
    if (typeof value !== 'string' || value === '') {
      return {
        ok: false,
        code: 'malformed',
        description: `claim "${name}" must be a non-empty string`,
      };
    }
    return { ok: true, value };
  }
  return {
    ok: false,
    code: 'claim_missing',
    description: `missing ${role} claim: ${quoted(names)}`,
  };
}

function tenantOf(claims: JWTPayload, tenant: TenantMapping): Read<string> {
  const names = tenant.claim ?? [];
  if (names.length > 0) {
    const fromClaim = firstString(claims, names, 'tenant');
    if (fromClaim.ok || fromClaim.code === 'malformed') return fromClaim;
  }
  if (tenant.fromIssuerRealm) {
    const realm = realmOf(claims.iss);
    if (realm) return { ok: true, value: realm };
  }
  if (tenant.fixed) return { ok: true, value: tenant.fixed };
  const sources = [
    ...(names.length ? [quoted(names)] : []),
    ...(tenant.fromIssuerRealm ? ['a realm in "iss"'] : []),
  ];
  return {
    ok: false,
    code: 'claim_missing',
    description: `missing tenant claim: ${sources.join(' or ')}`,
  };
}

/** The realm name of a Keycloak issuer: `https://kc.example/realms/acme` → `acme`. */
function realmOf(iss: unknown): string | undefined {
  if (typeof iss !== 'string' || !URL.canParse(iss)) return undefined;
  const match = /\/realms\/([^/]+)\/?$/.exec(new URL(iss).pathname);
  if (!match) return undefined;
  try {
    return decodeURIComponent(match[1]!) || undefined;
  } catch {
    return undefined;
  }
}

function scopesOf(claims: JWTPayload, sources: readonly ScopeClaim[]): Read<string[]> {
  const scopes = new Set<string>();
  let present = false;
  for (const { claim, format } of sources) {
    const value = claims[claim];
    if (value === undefined || value === null) continue;
    present = true;
    if (format === 'space') {
      if (typeof value !== 'string') {
        return {
          ok: false,
          code: 'malformed',
          description: `claim "${claim}" must be a space-separated string`,
        };
      }
      for (const scope of value.split(' ')) if (scope) scopes.add(scope);
    } else {
      if (!Array.isArray(value) || !value.every((s) => typeof s === 'string')) {
        return {
          ok: false,
          code: 'malformed',
          description: `claim "${claim}" must be an array of strings`,
        };
      }
      for (const scope of value) if (scope) scopes.add(scope);
    }
  }
  if (!present) {
    return {
      ok: false,
      code: 'claim_missing',
      description: `missing scope claim: ${quoted(sources.map((s) => s.claim))}`,
    };
  }
  return { ok: true, value: [...scopes] };
}
