import type { PrincipalRef } from '@mtg/tasks';
import { refuse, type SetRefusal } from './set-errors.ts';
import type { SecurityEventClaims } from './verify-security-event.ts';

// RISC 1.0 and CAEP 1.0 event types this receiver acts on.
export const RISC_ACCOUNT_DISABLED =
  'https://schemas.openid.net/secevent/risc/event-type/account-disabled';
export const RISC_ACCOUNT_ENABLED =
  'https://schemas.openid.net/secevent/risc/event-type/account-enabled';
export const CAEP_SESSION_REVOKED =
  'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
export const CAEP_CREDENTIAL_CHANGE =
  'https://schemas.openid.net/secevent/caep/event-type/credential-change';

export interface SecurityEventAction {
  kind: 'revoke' | 'restore';
  /** The revocation path recorded and audited, e.g. `ssf:account-disabled`. */
  path: string;
  eventType: string;
}

/** What each understood event means here. Every other event type is ignored (and logged). */
const ACTIONS: Readonly<Record<string, Omit<SecurityEventAction, 'eventType'>>> = {
  [RISC_ACCOUNT_DISABLED]: { kind: 'revoke', path: 'ssf:account-disabled' },
  [CAEP_SESSION_REVOKED]: { kind: 'revoke', path: 'ssf:session-revoked' },
  [CAEP_CREDENTIAL_CHANGE]: { kind: 'revoke', path: 'ssf:credential-change' },
  [RISC_ACCOUNT_ENABLED]: { kind: 'restore', path: 'ssf:account-enabled' },
};

export type ReadSecurityEventResult =
  | {
      ok: true;
      /** Absent when no event is one we act on. */
      principal?: PrincipalRef;
      actions: SecurityEventAction[];
      ignored: string[];
    }
  | SetRefusal;

const MAX_IDENTIFIER_LENGTH = 256;
// U+0000 cannot be stored in PostgreSQL text (nor issued in an access token we accept).
const isIdentifier = (v: unknown): v is string =>
  typeof v === 'string' &&
  v.length > 0 &&
  v.length <= MAX_IDENTIFIER_LENGTH &&
  !v.includes('\u0000');

/**
 * Reads what a verified SET asks of us: the principal — subject from `sub_id` (RFC 9493
 * `iss_sub`, `email` or `opaque`; the SSF 1.0 place, else the event's own `subject`) and the
 * tenant (top-level `tenant`, else `sub_id.tenant`: a `sub` is unique only within its tenant)
 * — and the actions, in the order the events are listed.
 *
 * `subjectIssuer` is the issuer of the access tokens this gateway accepts: an `iss_sub`
 * subject names a user of that issuer, or nobody we know.
 */
export function readSecurityEvent(
  claims: SecurityEventClaims,
  subjectIssuer: string,
): ReadSecurityEventResult {
  const actions: SecurityEventAction[] = [];
  const ignored: string[] = [];
  for (const eventType of Object.keys(claims.events)) {
    const action = ACTIONS[eventType];
    if (action) actions.push({ ...action, eventType });
    else ignored.push(eventType);
  }
  if (actions.length === 0) return { ok: true, actions, ignored };

  const subId = claims.sub_id ?? claims.events[actions[0]!.eventType]!.subject;
  if (typeof subId !== 'object' || subId === null || Array.isArray(subId)) {
    return refuse('invalid_request', 'the SET names no subject ("sub_id")');
  }
  const id = subId as Record<string, unknown>;
  let subject: unknown;
  switch (id.format) {
    case 'iss_sub':
      if (id.iss !== subjectIssuer) {
        return refuse(
          'invalid_request',
          'the subject is not a user of the issuer this gateway trusts',
        );
      }
      subject = id.sub;
      break;
    case 'email':
      subject = id.email;
      break;
    case 'opaque':
      subject = id.id;
      break;
    default:
      return refuse(
        'invalid_request',
        'the subject identifier format is not supported (iss_sub, email, opaque)',
      );
  }
  if (!isIdentifier(subject))
    return refuse('invalid_request', 'the subject identifier is empty or invalid');

  const top = claims.tenant;
  const nested = id.tenant;
  if (top !== undefined && nested !== undefined && top !== nested) {
    return refuse('invalid_request', 'claim "tenant" and "sub_id.tenant" differ');
  }
  const tenant = top ?? nested;
  if (!isIdentifier(tenant)) return refuse('invalid_request', 'the SET names no tenant');
  return { ok: true, principal: { tenant, subject }, actions, ignored };
}
