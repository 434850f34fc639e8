import { nowMs } from '@mtg/clock';
import { importJWK, SignJWT } from 'jose';
import type { Logger } from '@mtg/log';
import { SIGNING_ALG, type SigningJwk } from '../signing-key.ts';
import {
  accountDisabledEvents,
  accountEnabledEvents,
  type SecurityEventClaims,
  type SubjectUser,
} from './security-events.ts';

export interface PushTarget {
  /** The receiver's RFC 8935 push endpoint. */
  url: string;
  /** Authorization header value agreed with the receiver, if any. */
  authorization?: string;
}

/** The outcome of pushing one SET; `status` is the receiver's HTTP status when it answered. */
export interface Delivery {
  event: string;
  jti: string;
  delivered: boolean;
  status?: number;
  error?: string;
}

export type PushReport =
  { pushed: false; reason: 'no_push_url' } | { pushed: true; url: string; deliveries: Delivery[] };

export interface SecurityEventTransmitter {
  accountDisabled(user: SubjectUser): Promise<PushReport>;
  accountEnabled(user: SubjectUser): Promise<PushReport>;
}

const PUSH_TIMEOUT_MS = 5000;

/**
 * A Shared Signals transmitter with push delivery (RFC 8935) to one receiver: each event is
 * a separate SET signed with the IdP's key. Failures are reported, never thrown: the account
 * change has happened whether or not the receiver heard of it.
 */
export function createSecurityEventTransmitter(options: {
  issuer: string;
  audience: string;
  signingKey: SigningJwk;
  target?: PushTarget;
  fetch?: typeof fetch;
  now?: () => number;
  logger: Logger;
}): SecurityEventTransmitter {
  const doFetch = options.fetch ?? fetch;
  const now = options.now ?? nowMs;
  const keyPromise = importJWK(options.signingKey, SIGNING_ALG);

  async function sign(claims: SecurityEventClaims): Promise<string> {
    return new SignJWT(claims)
      .setProtectedHeader({ alg: SIGNING_ALG, kid: options.signingKey.kid, typ: 'secevent+jwt' })
      .sign(await keyPromise);
  }

  async function deliver(target: PushTarget, claims: SecurityEventClaims): Promise<Delivery> {
    const event = Object.keys(claims.events)[0] ?? '';
    const base = { event, jti: claims.jti };
    try {
      const response = await doFetch(target.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/secevent+jwt',
          accept: 'application/json',
          ...(target.authorization ? { authorization: target.authorization } : {}),
        },
        body: await sign(claims),
        signal: AbortSignal.timeout(PUSH_TIMEOUT_MS),
      });
      // RFC 8935 §2.2: 202 Accepted; a 400 carries { err, description }.
      const text = await response.text().catch(() => '');
      const delivered = response.status === 202 || response.ok;
      const delivery: Delivery = { ...base, delivered, status: response.status };
      if (!delivered) delivery.error = text.slice(0, 500);
      return delivery;
    } catch (error) {
      // fetch's own message is "fetch failed"; the cause says why (ECONNREFUSED, timeout).
      const cause = (error as Error).cause as Error | undefined;
      return { ...base, delivered: false, error: cause?.message ?? (error as Error).message };
    }
  }

  async function push(user: SubjectUser, sets: SecurityEventClaims[]): Promise<PushReport> {
    const target = options.target;
    if (!target) return { pushed: false, reason: 'no_push_url' };
    const deliveries: Delivery[] = [];
    for (const claims of sets) deliveries.push(await deliver(target, claims));
    for (const d of deliveries) {
      const meta = { url: target.url, sub: user.sub, tenant: user.tenant, ...d };
      if (d.delivered) options.logger.info('security event pushed', meta);
      else options.logger.warn('security event push failed', meta);
    }
    return { pushed: true, url: target.url, deliveries };
  }

  const context = () => ({ issuer: options.issuer, audience: options.audience, now: now() });
  return {
    accountDisabled: (user) => push(user, accountDisabledEvents(context(), user)),
    accountEnabled: (user) => push(user, accountEnabledEvents(context(), user)),
  };
}
