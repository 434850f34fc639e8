import { trace } from '@opentelemetry/api';
import { runPrepared, type Queryable } from '@mtg/db';
import { canonicalJson } from './canonical-json.ts';
import { APPEND, APPEND_MANY, createGroupCommit } from './group-commit.ts';
import { currentRequestOrigin, type RequestOrigin } from './request-origin.ts';

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
  /** Denials only: the refused request's client address and user agent (request-origin.ts). */
  origin?: RequestOrigin;
  /** The trace the event was written in, when tracing is on (docs/operations.md, "Tracing"). */
  traceId?: string;
  data?: Record<string, unknown>;
}

const DENIALS: ReadonlySet<AuditEventType> = new Set(['auth.denied', 'task.denied']);

/**
 * What the context adds: the trace id of the span the event is written in (tracing on), and
 * for a denial written while a request is handled, where that request came from.
 */
function withOrigin(event: AuditEvent): AuditEvent {
  const sc = event.traceId ? undefined : trace.getActiveSpan()?.spanContext();
  if (sc && trace.isSpanContextValid(sc)) event = { ...event, traceId: sc.traceId };
  if (event.origin || !DENIALS.has(event.type)) return event;
  const origin = currentRequestOrigin();
  return origin && (origin.ip || origin.userAgent) ? { ...event, origin } : event;
}

const groups = new WeakMap<object, (type: string, body: string) => Promise<number>>();
const observers = new WeakMap<object, (seconds: number) => void>();

/**
 * Reports how long each append through `pool` takes, from the call until its group has
 * committed (the append latency metric). Appends inside a caller's transaction are part of
 * that transaction's time and are not reported.
 */
export function observeAuditAppends(pool: Queryable, observe: (seconds: number) => void): void {
  observers.set(pool, observe);
}

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
  const { type, ...body } = withOrigin(event);
  const text = canonicalJson(body);
  if (isPool(db)) {
    let group = groups.get(db);
    if (!group) groups.set(db, (group = createGroupCommit(db)));
    const observe = observers.get(db);
    if (!observe) return group(type, text);
    const started = performance.now();
    return group(type, text).then((seq) => {
      observe((performance.now() - started) / 1000);
      return seq;
    });
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
  const bodies = events.map((e) => {
    const { type: _type, ...body } = withOrigin(e);
    return canonicalJson(body);
  });
  const result = await runPrepared<{ seqs: unknown[] }>(db, APPEND_MANY, [types, bodies]);
  return result.rows[0]!.seqs.map(Number);
}
