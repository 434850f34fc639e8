import type { Queryable } from '@mtg/db';
import { TENANT_REASON, type ReadScope } from './scope.ts';

export interface TimelineEvent {
  seq: number;
  occurred_at: string;
  type: string;
  subject: string | null;
  client: string | null;
  tool: string | null;
  reason: string | null;
  correlation_id: string | null;
  actor_subject: string | null;
  actor_kind: string | null;
  data: Record<string, unknown> | null;
}

/**
 * Every audit event of one task in seq order, or undefined when the task is not of this
 * tenant (or, for a user, not their own): the same answer as a task that does not exist.
 */
export async function taskTimeline(
  db: Queryable,
  scope: ReadScope,
  taskId: string,
): Promise<TimelineEvent[] | undefined> {
  const { rows } = await db.query<TimelineEvent>(
    `SELECT seq, occurred_at, type, subject, client, tool, ${TENANT_REASON} AS reason, correlation_id,
            actor_subject, actor_kind, data
       FROM audit.task_timeline WHERE task_id = $1 AND tenant = $2
      ORDER BY occurred_at, chain_id, seq`,
    [taskId, scope.tenant],
  );
  const created = rows.find((r) => r.type === 'task.created');
  if (!created) return undefined;
  if (scope.ownerOnly !== undefined) {
    if (created.subject !== scope.ownerOnly) return undefined;
    return rows.map((r) => (isDenialOfAnother(r, scope.ownerOnly!) ? denialWithoutWho(r) : r));
  }
  return rows;
}

const DENIALS = new Set(['task.denied', 'auth.denied']);

function isDenialOfAnother(e: TimelineEvent, owner: string): boolean {
  return DENIALS.has(e.type) && e.subject !== owner;
}

/**
 * A user sees that someone was refused their task, and when and why, not who: the prober's
 * subject, client, correlation and request details (its address) are for the tenant's
 * auditors. The verb stays: "a read was refused" is the user's own business.
 */
function denialWithoutWho(e: TimelineEvent): TimelineEvent {
  const verb = e.data?.verb;
  return {
    ...e,
    subject: null,
    client: null,
    correlation_id: null,
    actor_subject: null,
    actor_kind: null,
    data: typeof verb === 'string' ? { verb } : null,
  };
}

/** The systems a task touched, as its events name them (delegation audiences, targets). */
export function systemsTouched(events: TimelineEvent[]): string[] {
  const found = new Set<string>();
  for (const e of events) {
    const d = e.data ?? {};
    for (const v of [
      d.target,
      d.audience,
      d.upstream,
      (d.to as { audience?: unknown })?.audience,
    ]) {
      if (typeof v === 'string' && v) found.add(v);
    }
  }
  return [...found];
}
