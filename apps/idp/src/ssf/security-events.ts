import { randomUUID } from 'node:crypto';
import type { JWTPayload } from 'jose';

// Event types (RISC 1.0, CAEP 1.0) the dev IdP transmits.
export const RISC_ACCOUNT_DISABLED =
  'https://schemas.openid.net/secevent/risc/event-type/account-disabled';
export const RISC_ACCOUNT_ENABLED =
  'https://schemas.openid.net/secevent/risc/event-type/account-enabled';
export const CAEP_SESSION_REVOKED =
  'https://schemas.openid.net/secevent/caep/event-type/session-revoked';

export interface SubjectUser {
  sub: string;
  tenant: string;
}

/** The claims of one Security Event Token (RFC 8417), one event per SET. */
export interface SecurityEventClaims extends JWTPayload {
  iss: string;
  aud: string;
  jti: string;
  iat: number;
  /** RFC 9493 subject identifier; `tenant` is a copy of the top-level claim. */
  sub_id: { format: 'iss_sub'; iss: string; sub: string; tenant: string };
  /** The user's tenant: a `sub` is only unique within its tenant. */
  tenant: string;
  events: Record<string, Record<string, unknown>>;
}

export interface SetContext {
  issuer: string;
  audience: string;
  /** Epoch milliseconds. */
  now: number;
  newId?: () => string;
}

function securityEvent(
  context: SetContext,
  user: SubjectUser,
  eventType: string,
  event: Record<string, unknown>,
): SecurityEventClaims {
  return {
    iss: context.issuer,
    aud: context.audience,
    jti: (context.newId ?? randomUUID)(),
    iat: Math.floor(context.now / 1000),
    sub_id: { format: 'iss_sub', iss: context.issuer, sub: user.sub, tenant: user.tenant },
    tenant: user.tenant,
    events: { [eventType]: event },
  };
}

/** What a disabled account means to a receiver: stop acting for this person. */
export function accountDisabledEvents(
  context: SetContext,
  user: SubjectUser,
): SecurityEventClaims[] {
  return [
    securityEvent(context, user, RISC_ACCOUNT_DISABLED, { reason: 'dev-idp' }),
    securityEvent(context, user, CAEP_SESSION_REVOKED, {
      event_timestamp: Math.floor(context.now / 1000),
    }),
  ];
}

export function accountEnabledEvents(
  context: SetContext,
  user: SubjectUser,
): SecurityEventClaims[] {
  return [securityEvent(context, user, RISC_ACCOUNT_ENABLED, {})];
}
