/**
 * Glossary
 * - principal: what a validated access token says about who is calling: the issuer that
 *   vouched, the tenant, the subject (end user or service), the client (the workload that
 *   holds the token) and the scopes granted. Nothing here is looked up; it is all in the token.
 * - actor: RFC 8693 §4.1 `act` — who is acting on behalf of the subject, outermost first
 *   (`act.act` is the actor before that).
 * - tenant: the customer boundary every task is bound to; where it comes from differs per
 *   issuer (a claim, the Keycloak realm, or one fixed value per deployment).
 */

/** RFC 8693 `act` claim, reduced to what authorization decisions use. */
export type Actor = { sub: string; act?: Actor };

export type Principal = {
  issuer: string;
  tenant: string;
  subject: string;
  client: string;
  scopes: string[];
  /** `jti`, when the issuer sets one. */
  tokenId?: string;
  /** `exp`, epoch seconds. */
  expiresAt: number;
  /** `iat`, epoch seconds, when the issuer sets it (RFC 9068 requires it). */
  issuedAt?: number;
  actor?: Actor;
};

/** True when the principal holds every scope in `needed` (an empty list is always held). */
export function hasScopes(
  principal: Pick<Principal, 'scopes'>,
  needed: readonly string[],
): boolean {
  return needed.every((scope) => principal.scopes.includes(scope));
}
