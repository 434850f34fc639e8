import type { Pool } from 'pg';
import {
  auditAppendArgs,
  auditAppendTemplate,
  filledAuditBody,
  filledBySql,
  type AuditEvent,
} from '@mtg/audit';
import { prepared, runPrepared } from '@mtg/db';
import type { StoredResult } from './read-result.ts';

/**
 * A completed task's result read on the primary, with what the read records, in ONE
 * statement (its own transaction):
 * - the status read as the policy says (`$6`: `mark` inserts the caller's mark and appends
 *   `task.status_read` only if the mark is new, `all` appends it, `none` neither);
 * - the result: a delete-on-read one is deleted by the same statement, so only one reader
 *   gets it;
 * - only if there was one, `task.result_read`, its size and whether it was deleted filled in
 *   from the row.
 * The events are appended in that order: the result's append waits for the status read's
 * count. The statement always returns one row (null columns when no result is stored), and
 * the outer side of its LEFT JOIN, evaluated first, is that count: the status read is
 * recorded whether or not a result is found. Before, the same read took three round trips
 * and up to three commits: the mark with its event, the result, and the `task.result_read`
 * append.
 */
const TAKE_RESULT_AUDITED = prepared(
  `WITH mark AS (
     INSERT INTO app.status_read_marks (task_id, tenant, subject, client, status_version)
     SELECT $1, $2, $3, $4, $5 WHERE $6 = 'mark'
     ON CONFLICT DO NOTHING RETURNING task_id),
   status_read AS (
     SELECT audit.append($7, $8) AS seq
      WHERE $6 = 'all' OR ($6 = 'mark' AND EXISTS (SELECT 1 FROM mark))),
   taken AS (
     DELETE FROM app.task_results WHERE task_id = $1 AND delete_on_read AND expires_at > now()
     RETURNING result, is_error, size_bytes, delete_on_read),
   found AS (
     SELECT result, is_error, size_bytes, delete_on_read FROM taken
     UNION ALL
     SELECT result, is_error, size_bytes, delete_on_read FROM app.task_results
      WHERE task_id = $1 AND NOT delete_on_read AND expires_at > now()),
   result_read AS (
     SELECT got.result, got.is_error, got.size_bytes, got.delete_on_read,
            audit.append($9, ${filledAuditBody(
              '$10',
              '$11',
              `jsonb_build_object('sizeBytes', got.size_bytes, 'deletedOnRead', got.delete_on_read)`,
            )}) AS seq
       FROM found got CROSS JOIN (SELECT count(*) FROM status_read) s)
   SELECT r.result, r.is_error, r.size_bytes, r.delete_on_read
     FROM (SELECT count(*) FROM status_read) s LEFT JOIN result_read r ON true`,
);

/**
 * Takes a completed task's result on the primary and records the read (TAKE_RESULT_AUDITED).
 * `statusRead`: how the status read is recorded (statusReadRecord; undefined: it is not, as
 * for tasks/result); `resultRead`: the
 * `task.result_read` event, whose `data` gets `sizeBytes` and `deletedOnRead` from the row.
 * Undefined: no result is stored any more (expired, or taken by another read); the status
 * read is recorded all the same, the result's absence is the caller's to deny.
 */
export async function takeResultAudited(
  pool: Pool,
  task: { id: string; status_version: number },
  reader: { tenant: string; subject: string; client: string },
  statusRead: { how: 'none' | 'mark' | 'all'; event: AuditEvent } | undefined,
  resultRead: AuditEvent,
): Promise<StoredResult | undefined> {
  const how = statusRead?.how ?? 'none';
  const [statusType, statusBody] =
    statusRead && how !== 'none' ? auditAppendArgs(statusRead.event) : [null, null];
  const r = await runPrepared<{
    result: StoredResult['result'] | null;
    is_error: boolean;
    size_bytes: number;
    delete_on_read: boolean;
  }>(pool, TAKE_RESULT_AUDITED, [
    task.id,
    reader.tenant,
    reader.subject,
    reader.client,
    task.status_version,
    how,
    statusType,
    statusBody,
    ...auditAppendTemplate({
      ...resultRead,
      data: {
        ...resultRead.data,
        sizeBytes: filledBySql('sizeBytes'),
        deletedOnRead: filledBySql('deletedOnRead'),
      },
    }),
  ]);
  const row = r.rows[0];
  if (!row || row.result === null) return undefined;
  return {
    result: row.result,
    isError: row.is_error,
    sizeBytes: row.size_bytes,
    deletedOnRead: row.delete_on_read,
  };
}
