/**
 * Glossary
 * - SET: a Security Event Token (RFC 8417), a signed JWT carrying one or more events about
 *   a subject (here: "this account was disabled", "this session was revoked").
 * - transmitter: who sends SETs (the IdP); receiver: who acts on them (this gateway).
 * - push delivery: the transmitter POSTs each SET to the receiver (RFC 8935).
 */

/** The error codes of RFC 8935 §2.4 (the `err` member of a 400 answer). */
export type SetErrorCode =
  | 'invalid_request'
  | 'invalid_key'
  | 'invalid_issuer'
  | 'invalid_audience'
  | 'authentication_failed'
  | 'access_denied';

/** Why a SET was not accepted: an RFC 8935 code, or our own outage (the issuer's keys). */
export type SetRefusal =
  | { ok: false; code: SetErrorCode; description: string }
  | { ok: false; code: 'keys_unavailable'; description: string };

export const refuse = (code: SetErrorCode, description: string): SetRefusal => ({
  ok: false,
  code,
  description,
});

/**
 * The HTTP answer to a refused push. RFC 8935 §2.3: an error "parsing, validating, or
 * authenticating" a SET is a 400 with `{ err, description }` — a failed transmitter
 * authentication included (the RFC's own example is a 400 `authentication_failed`). Only our
 * own outage is not the transmitter's fault: 503, so it delivers again.
 */
export function setErrorResponse(refusal: SetRefusal): {
  status: number;
  headers: Record<string, string>;
  body: Record<string, string>;
} {
  if (refusal.code === 'keys_unavailable') {
    return {
      status: 503,
      headers: { 'Retry-After': '5' },
      body: { description: refusal.description },
    };
  }
  return {
    status: 400,
    headers: {},
    body: { err: refusal.code, description: refusal.description },
  };
}
