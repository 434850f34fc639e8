import { runPrepared, type Queryable } from '@mtg/db';
import { canonicalJson } from './canonical-json.ts';
import { APPEND, APPEND_MANY, createGroupCommit } from './group-commit.ts';

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
  | 'task.resumed'
  | 'upstream.call'
  | 'upstream.task_created'
  | 'upstream.task_cancelled'
  | 'upstream.task_ended';

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

const groups = new WeakMap<object, (type: string, body: string) => Promise<number>>();

/** A pool (each query its own autocommit transaction), not one client's session. */
function isPool(db: Queryable): boolean {
  return 'totalCount' in db && 'idleCount' in db;
}

/**
 * Appends an event and resolves with its sequence number once it is committed.
 *
 * On a client inside the caller's transaction, the event commits (or rolls back) with that
 * transaction. Call it as the LAST statement there: audit.append() holds the chain lock until
 * commit, and taking it last keeps that hold short and the lock order acyclic.
 *
 * On a pool, the event is its own transaction, and events appended on the same pool while
 * another commits share the next commit (group commit, ./group-commit.ts): the promise still
 * settles only after the event is durable.
 */
export async function appendAudit(db: Queryable, event: AuditEvent): Promise<number> {
  const { type, ...body } = event;
  const text = canonicalJson(body);
  if (isPool(db)) {
    let group = groups.get(db);
    if (!group) groups.set(db, (group = createGroupCommit(db)));
    return group(type, text);
  }
  const result = await runPrepared<{ seq: string }>(db, APPEND, [type, text]);
  return Number(result.rows[0]!.seq);
}

/**
 * Appends several events in order, committed together: in the caller's transaction on a
 * client (one statement, so the chain lock is taken one round trip later than with one
 * appendAudit() per event), or through the pool's group commit.
 */
export async function appendAuditEvents(
  db: Queryable,
  events: readonly AuditEvent[],
): Promise<number[]> {
  if (isPool(db)) return Promise.all(events.map((e) => appendAudit(db, e)));
  if (events.length === 0) return [];
  const types = events.map((e) => e.type);
  const bodies = events.map(({ type: _type, ...body }) => canonicalJson(body));
  const result = await runPrepared<{ seqs: unknown[] }>(db, APPEND_MANY, [types, bodies]);
  return result.rows[0]!.seqs.map(Number);
}
