import type { Queryable } from '@mtg/db';
import type { ReadScope } from './scope.ts';

export interface TaskSearch {
  id?: string;
  user?: string;
  client?: string;
  tool?: string;
  status?: string;
  /** ISO 8601: created at or after. */
  from?: string;
  /** ISO 8601: created before. */
  to?: string;
  limit?: number;
}

export interface TaskSummary {
  task_id: string;
  created_at: string;
  last_event_at: string;
  subject: string | null;
  client: string | null;
  tool: string | null;
  status: string;
  events: number;
}

export const TASK_STATUSES = [
  'submitted',
  'working',
  'paused',
  'input_required',
  'completed',
  'failed',
  'cancelled',
];

// A task's status as its audit trail tells it: the last lifecycle event.
const STATUS_OF = `CASE (array_agg(type ORDER BY occurred_at DESC, chain_id DESC, seq DESC) FILTER (WHERE type IN
    ('task.created','task.started','task.lease_taken','task.step_completed','task.paused',
     'task.resumed','task.input_required','task.input_resolved','task.completed','task.failed',
     'task.cancelled','task.admin_cancelled','task.input_requested','task.input_received',
     'task.approval_requested','task.approved','task.rejected')))[1]
    WHEN 'task.created' THEN 'submitted'
    WHEN 'task.paused' THEN 'paused'
    -- An upstream task waiting for input (mirrored; its worker still holds the lease).
    WHEN 'task.input_required' THEN 'input_required'
    -- Parked on a question to its caller or a second person's approval.
    WHEN 'task.input_requested' THEN 'input_required'
    WHEN 'task.approval_requested' THEN 'input_required'
    WHEN 'task.completed' THEN 'completed'
    WHEN 'task.failed' THEN 'failed'
    WHEN 'task.cancelled' THEN 'cancelled'
    WHEN 'task.admin_cancelled' THEN 'cancelled'
    ELSE 'working' END`;

/** Tasks of the tenant (a user: their own), newest first, from audit.task_timeline. */
export async function searchTasks(
  db: Queryable,
  scope: ReadScope,
  q: TaskSearch,
): Promise<TaskSummary[]> {
  const { rows } = await db.query<TaskSummary>(
    `WITH t AS (
       SELECT task_id,
              min(occurred_at) AS created_at,
              max(occurred_at) AS last_event_at,
              (array_agg(subject ORDER BY occurred_at, chain_id, seq) FILTER (WHERE type = 'task.created'))[1] AS subject,
              (array_agg(client ORDER BY occurred_at, chain_id, seq) FILTER (WHERE type = 'task.created'))[1] AS client,
              (array_agg(tool ORDER BY occurred_at, chain_id, seq) FILTER (WHERE tool IS NOT NULL))[1] AS tool,
              ${STATUS_OF} AS status,
              count(*)::int AS events
         FROM audit.task_timeline
        WHERE tenant = $1 AND ($2::text IS NULL OR task_id = $2)
        GROUP BY task_id
       HAVING bool_or(type = 'task.created'))
     SELECT task_id, created_at, last_event_at, subject, client, tool, status, events FROM t
      WHERE ($3::text IS NULL OR subject = $3) AND ($4::text IS NULL OR subject = $4)
        AND ($5::text IS NULL OR client = $5) AND ($6::text IS NULL OR tool = $6)
        AND ($7::text IS NULL OR status = $7)
        AND ($8::timestamptz IS NULL OR created_at >= $8)
        AND ($9::timestamptz IS NULL OR created_at < $9)
      ORDER BY created_at DESC, task_id LIMIT $10`,
    [
      scope.tenant,
      q.id ?? null,
      scope.ownerOnly ?? null,
      q.user ?? null,
      q.client ?? null,
      q.tool ?? null,
      q.status ?? null,
      q.from ?? null,
      q.to ?? null,
      q.limit ?? 200,
    ],
  );
  return rows;
}
