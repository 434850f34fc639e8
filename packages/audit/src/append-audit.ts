import type { Queryable } from '@mtg/db';
import { canonicalJson } from './canonical-json.ts';

export type AuditEventType =
  | 'task.created'
  | 'task.deduplicated'
  | 'task.started'
  | 'task.step_started'
  | 'task.step_completed'
  | 'task.status_read'
  | 'task.result_read'
  | 'task.cancel_requested'
  | 'task.cancelled'
  | 'task.admin_cancelled'
  | 'task.completed'
  | 'task.failed'
  | 'task.lease_taken'
  | 'task.delegated'
  | 'task.identity_refreshed'
  | 'task.purged'
  | 'task.denied'
  | 'auth.denied'
  | 'principal.revoked'
  | 'principal.restored'
  | 'task.paused'
  | 'task.resumed';

/**
 * One audit event. Who (tenant/subject/client), what (task, tool) and why (reason) are
 * top-level so auditors can index them; details go in `data`. Never a token, a secret or
 * raw result data: callers pass summaries.
 */
export interface AuditEvent {
  type: AuditEventType;
  taskId?: string;
  tenant?: string;
  subject?: string;
  client?: string;
  tool?: string;
  reason?: string;
  correlationId?: string;
  actor?: { subject: string; client?: string; kind: 'user' | 'admin' | 'worker' | 'system' };
  data?: Record<string, unknown>;
}

/**
 * Appends an event in the caller's transaction. Call it as the LAST statement of the
 * transaction: audit.append() holds the chain lock until commit, and taking it last keeps
 * that hold short and the lock order acyclic.
 */
export async function appendAudit(db: Queryable, event: AuditEvent): Promise<number> {
  const { type, ...body } = event;
  const result = await db.query<{ seq: number }>('SELECT audit.append($1, $2) AS seq', [
    type,
    canonicalJson(body),
  ]);
  return result.rows[0]!.seq;
}
