import { trace } from '@opentelemetry/api';
import type { ClientBase, Pool } from 'pg';
import { runPrepared } from '@mtg/db';
import { canonicalJson, FILL_MARK, SqlFilled } from './canonical-json.ts';
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
  | 'task.resumed'
  | 'task.input_required'
  | 'task.input_resolved'
  | 'task.input_requested'
  | 'task.input_received'
  | 'task.approval_requested'
  | 'task.approved'
  | 'task.rejected'
  | 'upstream.call'
  | 'upstream.task_created'
  | 'upstream.task_cancelled'
  | 'upstream.task_ended'
  | 'audit.policy';

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
function withContext(event: AuditEvent): AuditEvent {
  const sc = event.traceId ? undefined : trace.getActiveSpan()?.spanContext();
  if (sc && trace.isSpanContextValid(sc)) event = { ...event, traceId: sc.traceId };
  if (event.origin || !DENIALS.has(event.type)) return event;
  const origin = currentRequestOrigin();
  return origin && (origin.ip || origin.userAgent) ? { ...event, origin } : event;
}

const groups = new WeakMap<Pool, (type: string, body: string) => Promise<number>>();
const observers = new WeakMap<object, (seconds: number) => void>();

/**
 * Reports how long each grouped append through `pool` takes, from the call until its group
 * has committed (the append latency metric). Appends inside a caller's transaction are part
 * of that transaction's time and are not reported.
 */
export function observeAuditAppends(pool: AuditPool, observe: (seconds: number) => void): void {
  observers.set(pool, observe);
}

/**
 * A client inside a transaction the caller opened (BEGIN … COMMIT): a pooled client or a
 * dedicated one, never a pool. (A pool has no `escapeLiteral`; a client has no
 * `totalCount`: passing one for the other does not compile.)
 */
export type AuditTransaction = Pick<ClientBase, 'query' | 'escapeLiteral'>;

/** A pool: each statement its own autocommit transaction. */
export type AuditPool = Pick<Pool, 'query' | 'totalCount'>;

/**
 * Appends an event inside the caller's transaction: it commits (or rolls back) with the
 * change it records. Call it as the LAST statement there: audit.append() holds the chain lock
 * until commit, and taking it last keeps that hold short and the lock order acyclic.
 * Resolves with the event's sequence number (durable once the caller commits).
 */
export async function appendAuditInTransaction(
  tx: AuditTransaction,
  event: AuditEvent,
): Promise<number> {
  const result = await runPrepared<{ seq: string }>(tx, APPEND, auditAppendArgs(event));
  return Number(result.rows[0]!.seq);
}

/**
 * The two arguments of `audit.append(type, body)` for an event, for a statement that appends
 * it itself: one statement that makes a change and records it (its own transaction, the
 * append last in it) saves the round trips of BEGIN, a separate append and COMMIT.
 */
export function auditAppendArgs(event: AuditEvent): [type: string, body: string] {
  const { type, ...body } = withContext(event);
  return [type, canonicalJson(body)];
}

/**
 * A body value the appending statement fills in: see `auditAppendTemplate`. Typed as the
 * string it stands for, so it fits a top-level field (`tenant`) as well as `data`.
 */
export const filledBySql = (name: string): string => new SqlFilled(name) as unknown as string;

/**
 * The arguments of an append whose body holds values only the appending statement knows,
 * because it computes or changes them (the epoch a claim takes, the duration a settlement
 * ends): the type, and the body's canonical text cut where each `filledBySql(name)` value
 * goes, with those names in text order. The statement joins them back with
 * `filledAuditBody`. So a change and its event need one statement, not a transaction of
 * three, even when the event tells what the change did.
 */
export function auditAppendTemplate(
  event: AuditEvent,
): [type: string, parts: string[], names: string[]] {
  const { type, ...body } = withContext(event);
  const names: string[] = [];
  const parts = canonicalJson(body, names).split(FILL_MARK);
  return [type, parts, names];
}

/**
 * SQL for the body of an `auditAppendTemplate`: `parts` and `names` are the statement's
 * parameters holding them, `values` a jsonb expression holding each named value. Each value
 * must be a scalar (a string, a number or null): jsonb writes those in canonical form, as
 * JSON.stringify does. A name `values` lacks leaves the text invalid JSON, which
 * audit.append refuses: the statement fails rather than record a wrong event.
 */
export function filledAuditBody(parts: string, names: string, values: string): string {
  return `(SELECT string_agg(f.part || COALESCE((${values} -> f.name)::text, ''), '' ORDER BY f.i)
             FROM unnest(${parts}::text[], ${names}::text[]) WITH ORDINALITY AS f(part, name, i))`;
}

/**
 * Appends several events in order inside the caller's transaction, in one statement (the
 * chain lock is taken one round trip later than with one append per event).
 */
export async function appendAuditEventsInTransaction(
  tx: AuditTransaction,
  events: readonly AuditEvent[],
): Promise<number[]> {
  if (events.length === 0) return [];
  const types = events.map((e) => e.type);
  const bodies = events.map((e) => {
    const { type: _type, ...body } = withContext(e);
    return canonicalJson(body);
  });
  const result = await runPrepared<{ seqs: unknown[] }>(tx, APPEND_MANY, [types, bodies]);
  return result.rows[0]!.seqs.map(Number);
}

/**
 * Appends an event that records no change of the caller's (a read, a denial, a token
 * refresh) as its own transaction: events appended on the same pool while another commits
 * share the next commit (group commit, ./group-commit.ts). Resolves with the event's
 * sequence number once it is durable.
 */
export async function appendAuditGrouped(pool: AuditPool, event: AuditEvent): Promise<number> {
  const { type, ...body } = withContext(event);
  const key = pool as Pool;
  let group = groups.get(key);
  if (!group) groups.set(key, (group = createGroupCommit(pool)));
  const observe = observers.get(pool);
  if (!observe) return group(type, canonicalJson(body));
  const started = performance.now();
  return group(type, canonicalJson(body)).then((seq) => {
    observe((performance.now() - started) / 1000);
    return seq;
  });
}
