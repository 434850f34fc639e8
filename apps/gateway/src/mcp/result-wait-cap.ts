import { appendAuditGrouped } from '@mtg/audit';
import type { Pool } from '@mtg/db';
import type { Principal } from '@mtg/identity';
import { taskError, type VerbContext } from '@mtg/tasks';
import type { TaskGuard } from './task-service-guards.ts';

/** How soon a caller refused for too many held results may try again. */
const RETRY_SECONDS = 5;

/**
 * A cap on the blocking `tasks/result` calls one caller (tenant + subject + client) holds open
 * at once on this replica. A blocking read costs one rate-limit point but may hold a
 * connection for up to TASK_RESULT_WAIT_MS; without a cap a single caller could pin any
 * number of them. Past the cap a call does not wait: it answers at once with the result if
 * the task has ended, else `result_wait_limit` (JSON-RPC -32000 with `retryAfterSeconds`).
 * The refusal is audited once per episode (until the caller's holds drop below the cap
 * again), so a flood of refused calls writes one event, not one each.
 */
export function resultWaitCap(options: { maxPerCaller: number; pool: Pool }): TaskGuard {
  const held = new Map<string, { holds: number; audited: boolean }>();
  const keyOf = (p: Principal) => `${p.tenant}\u0000${p.subject}\u0000${p.client}`;
  return {
    name: 'result wait cap',
    // Only a blocking result read holds anything; every other verb passes as it is.
    async around(call, next) {
      if (call.verb !== 'awaitResult') return next(call);
      const [taskId, ctx] = call.args as [string, VerbContext, number];
      const key = keyOf(ctx.principal);
      const entry = held.get(key) ?? { holds: 0, audited: false };
      if (entry.holds >= options.maxPerCaller) {
        const now = await next({ verb: 'result', args: [taskId, ctx] });
        if (now.ok || now.code !== 'result_not_ready') return now;
        if (!entry.audited) {
          entry.audited = true;
          await appendAuditGrouped(options.pool, {
            type: 'task.denied',
            taskId,
            tenant: ctx.principal.tenant,
            subject: ctx.principal.subject,
            client: ctx.principal.client,
            reason: 'result_wait_limit',
            correlationId: ctx.correlationId,
            data: { verb: 'result', wire: ctx.wire, limit: options.maxPerCaller },
          });
        }
        return taskError(
          'result_wait_limit',
          `Too many blocking tasks/result calls held open for you (limit ` +
            `${options.maxPerCaller}); wait for one to return, or poll tasks/get instead`,
          { retryAfterSeconds: RETRY_SECONDS },
        );
      }
      entry.holds++;
      held.set(key, entry);
      try {
        return await next(call);
      } finally {
        entry.holds--;
        if (entry.holds < options.maxPerCaller) entry.audited = false;
        if (entry.holds === 0) held.delete(key);
      }
    },
  };
}
