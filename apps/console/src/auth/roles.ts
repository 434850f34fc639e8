/**
 * Who is looking, from the access token's scopes: `audit:read` makes an auditor (reads the
 * whole tenant), `tasks:admin` an operator (reads the whole tenant and acts on it), anyone
 * else a user (their own tasks only). Always bound to the token's tenant.
 */
export type ConsoleRole = 'auditor' | 'operator' | 'user';

export const AUDIT_SCOPE = 'audit:read';
export const ADMIN_SCOPE = 'tasks:admin';

export function roleOf(scopes: readonly string[]): ConsoleRole {
  if (scopes.includes(ADMIN_SCOPE)) return 'operator';
  if (scopes.includes(AUDIT_SCOPE)) return 'auditor';
  return 'user';
}

/** Auditors and operators read everything of their tenant. */
export function readsTenant(role: ConsoleRole): boolean {
  return role !== 'user';
}

/** The scopes the login asks for, per role the person picks; the IdP decides what is granted. */
export const LOGIN_SCOPES: Record<ConsoleRole, string> = {
  auditor: AUDIT_SCOPE,
  operator: `${ADMIN_SCOPE} ${AUDIT_SCOPE}`,
  user: '',
};
