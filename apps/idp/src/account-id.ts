// oidc-provider knows one account id per session; a dev user is a (tenant, sub) pair, so the
// account id encodes both. Both parts are restricted to a charset without "/", which makes
// the encoding unambiguous and keeps the values safe in logs, file keys and HTML.

/** Allowed characters of a dev user's `sub` and `tenant`. */
export const IDENTIFIER = /^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$/;

export interface UserKey {
  tenant: string;
  sub: string;
}

export function isIdentifier(value: unknown): value is string {
  return typeof value === 'string' && IDENTIFIER.test(value);
}

export function encodeAccountId({ tenant, sub }: UserKey): string {
  return `${tenant}/${sub}`;
}

/** The (tenant, sub) an account id encodes, or undefined when it is not one of ours. */
export function decodeAccountId(accountId: string): UserKey | undefined {
  const slash = accountId.indexOf('/');
  if (slash === -1) return undefined;
  const tenant = accountId.slice(0, slash);
  const sub = accountId.slice(slash + 1);
  return isIdentifier(tenant) && isIdentifier(sub) ? { tenant, sub } : undefined;
}
