import type { Pool } from 'pg';
import { RateLimiterMemory, RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';

export type CallLimitDecision = { ok: true } | { ok: false; retryAfterSeconds: number };

/**
 * Proxied instant calls per caller (tenant + subject + client) per minute, counted in
 * app.rate_limits like the gateway's own limits, so every replica shares them; 0 is off.
 * Without PostgreSQL each replica counts on its own.
 */
export function createUpstreamCallLimit(pool: Pool, perMinute: number) {
  if (perMinute <= 0) return async (): Promise<CallLimitDecision> => ({ ok: true });
  const store = new RateLimiterPostgres({
    storeClient: pool,
    storeType: 'pool',
    schemaName: 'app',
    tableName: 'rate_limits',
    tableCreated: true,
    keyPrefix: 'upstream_calls',
    points: perMinute,
    duration: 60,
    inMemoryBlockOnConsumed: perMinute + 1,
    insuranceLimiter: new RateLimiterMemory({
      keyPrefix: 'upstream_calls',
      points: perMinute,
      duration: 60,
    }),
  });
  return async (caller: {
    tenant: string;
    subject: string;
    client: string;
  }): Promise<CallLimitDecision> => {
    try {
      await store.consume(JSON.stringify([caller.tenant, caller.subject, caller.client]));
      return { ok: true };
    } catch (error) {
      if (error instanceof RateLimiterRes) {
        return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil(error.msBeforeNext / 1000)) };
      }
      throw error;
    }
  };
}
