import type { Request, Response } from 'express';
import { appendAuditGrouped } from '@mtg/audit';
import type { Pool } from '@mtg/db';
import type { Principal } from '@mtg/identity';
import type { Logger } from '@mtg/log';
import { correlationIdOf } from './request-meta.ts';

/**
 * Audit for denials at the HTTP layer.
 * - A denial of a verified principal (e.g. insufficient scope) is one `auth.denied` event.
 * - A request with no valid token names nobody, and anyone can send millions: auditing each
 *   would let unauthenticated traffic flood the serialised chain (so would a Host or Origin
 *   not allowed, or a refused Security Event Token). Per reason, the first
 *   such denial in each window is written at once and the rest are counted and written as
 *   one summary event (`data.count`) when the window closes. Logs and metrics see every one.
 */
export function createDenialAuditor(options: { pool: Pool; logger: Logger; windowMs?: number }) {
  const windowMs = options.windowMs ?? 60_000;
  const suppressed = new Map<string, number>();
  const opened = new Set<string>();
  const write = (event: Parameters<typeof appendAuditGrouped>[1]) =>
    appendAuditGrouped(options.pool, event).catch((error: Error) =>
      options.logger.warn('denial audit failed', { error: error.message }),
    );
  const timer = setInterval(() => {
    for (const [reason, count] of suppressed) {
      if (count > 0)
        void write({ type: 'auth.denied', reason, data: { count, windowMs, summary: true } });
    }
    suppressed.clear();
    opened.clear();
  }, windowMs);
  timer.unref();

  /** A denial that names nobody verified: the first per reason and window, then a count. */
  const anonymous = (res: Response, reason: string, data: Record<string, unknown>) => {
    if (!opened.has(reason)) {
      opened.add(reason);
      void write({
        type: 'auth.denied',
        reason,
        correlationId: correlationIdOf(res) ?? '',
        data: { ...data, count: 1, firstInWindow: true },
      });
      return;
    }
    suppressed.set(reason, (suppressed.get(reason) ?? 0) + 1);
  };

  return {
    /** A request without a valid token. */
    unauthenticated(req: Request, res: Response, reason: string) {
      anonymous(res, reason, { path: req.path });
    },
    /**
     * Any other refusal of an unverified sender — a Host or Origin not allowed, a Security
     * Event Token refused — with what the refusal says (our own text, never the sender's).
     */
    anonymous,
    /** A verified principal denied at the HTTP layer. */
    principal(res: Response, principal: Principal, reason: string, tool?: string) {
      void write({
        type: 'auth.denied',
        tenant: principal.tenant,
        subject: principal.subject,
        client: principal.client,
        ...(tool ? { tool } : {}),
        reason,
        correlationId: correlationIdOf(res) ?? '',
      });
    },
    stop() {
      clearInterval(timer);
    },
  };
}
