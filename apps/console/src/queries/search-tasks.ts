import type { TaskStatus } from '@mtg/tool-kit';
import type { Queryable } from '@mtg/db';
import type { ReadScope } from './scope.ts';
import { STATUS_OF_SQL } from './task-status.ts';

export interface TaskSearch {
  id?: string;
  user?: string;
  client?: string;
  tool?: string;
  status?: TaskStatus;
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
  status: TaskStatus;
  events: number;
}

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
              ${STATUS_OF_SQL} AS status,
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
