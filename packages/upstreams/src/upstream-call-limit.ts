import type { Clock } from '@mtg/clock';
import { createWindowCounter } from '@mtg/db';
import type { Pool } from 'pg';

export type CallLimitDecision = { ok: true } | { ok: false; retryAfterSeconds: number };

/**
 * Proxied instant calls per caller (tenant + subject + client) per minute, counted in
 * app.rate_limits like the gateway's own limits, so every replica shares them; 0 is off.
 * Without PostgreSQL each replica counts on its own. Windows are on `clock` (the gateway's).
 */
export function createUpstreamCallLimit(pool: Pool, perMinute: number, clock?: Clock) {
  if (perMinute <= 0) return async (): Promise<CallLimitDecision> => ({ ok: true });
  const consume = createWindowCounter({
    pool,
    prefix: 'upstream_calls',
    points: perMinute,
    durationMs: 60_000,
    ...(clock ? { clock } : {}),
  });
  return async (caller: {
    tenant: string;
    subject: string;
    client: string;
  }): Promise<CallLimitDecision> => {
    const counted = await consume(JSON.stringify([caller.tenant, caller.subject, caller.client]));
    if (counted.ok) return counted;
    return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil(counted.msBeforeNext / 1000)) };
  };
}
