import { prepared, runPrepared, type Queryable } from '@mtg/db';

const TAKE_RESULT = prepared(
  `WITH taken AS (
     DELETE FROM app.task_results WHERE task_id = $1 AND delete_on_read AND expires_at > now()
     RETURNING result, is_error, size_bytes, delete_on_read)
   SELECT result, is_error, size_bytes, delete_on_read FROM taken
   UNION ALL
   SELECT result, is_error, size_bytes, delete_on_read FROM app.task_results
    WHERE task_id = $1 AND NOT delete_on_read AND expires_at > now()`,
);
const KEPT_RESULT = prepared(
  `SELECT result, is_error, size_bytes FROM app.task_results
    WHERE task_id = $1 AND NOT delete_on_read AND expires_at > now()`,
);

export interface StoredResult {
  result: { content: unknown[]; structuredContent?: Record<string, unknown>; isError?: boolean };
  isError: boolean;
  sizeBytes: number;
  deletedOnRead: boolean;
}

/**
 * Reads a task's stored result; a result marked delete-on-read is deleted by the same
 * statement, so exactly one reader gets it.
 */
export async function readResult(db: Queryable, taskId: string): Promise<StoredResult | undefined> {
  const r = await runPrepared<{
    result: StoredResult['result'];
    is_error: boolean;
    size_bytes: number;
    delete_on_read: boolean;
  }>(db, TAKE_RESULT, [taskId]);
  const row = r.rows[0];
  return row && stored(row, row.delete_on_read);
}

/**
 * A task's stored result, if it is one that a read leaves in place (not delete-on-read): the
 * only kind a read replica may answer, since taking a delete-on-read result is a write.
 */
export async function readKeptResult(
  db: Queryable,
  taskId: string,
): Promise<StoredResult | undefined> {
  const r = await runPrepared<{
    result: StoredResult['result'];
    is_error: boolean;
    size_bytes: number;
  }>(db, KEPT_RESULT, [taskId]);
  const row = r.rows[0];
  return row && stored(row, false);
}

function stored(
  row: { result: StoredResult['result']; is_error: boolean; size_bytes: number },
  deletedOnRead: boolean,
): StoredResult {
  return { result: row.result, isError: row.is_error, sizeBytes: row.size_bytes, deletedOnRead };
}
