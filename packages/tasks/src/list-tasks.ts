import type { Queryable } from '@mtg/db';
import type { Principal } from '@mtg/identity';
import { TASK_ID } from './task-id.ts';
import { toView, type TaskRow, type TaskView } from './task-row.ts';
import { RETAINED } from './task-state/predicates.ts';

export interface TaskPage {
  tasks: TaskView[];
  nextCursor?: string;
}

const MAX_PAGE = 100;

/**
 * The caller's own tasks, newest first, keyset-paginated with an opaque cursor. `withheld`
 * names the tools whose scope the caller's token lacks: their tasks are left out in SQL, so
 * every page is full and the cursor skips nothing (the other verbs refuse them as well).
 */
export async function listTasks(
  db: Queryable,
  p: Principal,
  page: { cursor?: string; limit?: number },
  withheld: readonly string[] = [],
): Promise<TaskPage> {
  const limit = Math.min(Math.max(page.limit ?? 50, 1), MAX_PAGE);
  const after = decodeCursor(page.cursor);
  const r = await db.query<TaskRow>(
    `SELECT * FROM app.tasks
      WHERE tenant = $1 AND subject = $2 AND client = $3 AND ${RETAINED}
        AND ($4::timestamptz IS NULL OR (created_at, id) < ($4::timestamptz, $5::text))
        AND tool <> ALL ($7::text[])
      ORDER BY created_at DESC, id DESC
      LIMIT $6`,
    [p.tenant, p.subject, p.client, after?.at ?? null, after?.id ?? '', limit + 1, withheld],
  );
  const rows = r.rows.slice(0, limit);
  const last = rows.at(-1);
  return {
    tasks: rows.map(toView),
    ...(r.rows.length > limit && last
      ? { nextCursor: encodeCursor({ at: last.created_at.toISOString(), id: last.id }) }
      : {}),
  };
}

function encodeCursor(c: { at: string; id: string }): string {
  return Buffer.from(JSON.stringify(c)).toString('base64url');
}

/**
 * A cursor this service issued, or undefined. Only the exact form encodeCursor writes is
 * read back (a canonical ISO instant and a task id), so a forged cursor never reaches
 * PostgreSQL's own timestamp parser; the service refuses it (isReadableCursor).
 */
function decodeCursor(cursor: string | undefined): { at: string; id: string } | undefined {
  if (!cursor) return undefined;
  try {
    const c = JSON.parse(Buffer.from(cursor, 'base64url').toString()) as {
      at?: unknown;
      id?: unknown;
    };
    if (
      typeof c.at === 'string' &&
      /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(c.at) &&
      !Number.isNaN(Date.parse(c.at)) &&
      new Date(c.at).toISOString() === c.at &&
      typeof c.id === 'string' &&
      TASK_ID.test(c.id)
    ) {
      return { at: c.at, id: c.id };
    }
  } catch {
    // not JSON: unreadable
  }
  return undefined;
}

/** Whether a client's cursor is one this service issued (an absent one is the first page). */
export function isReadableCursor(cursor: string | undefined): boolean {
  return !cursor || decodeCursor(cursor) !== undefined;
}
