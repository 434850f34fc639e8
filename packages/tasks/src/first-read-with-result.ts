import type { Pool } from 'pg';
import {
  appendEventSql,
  auditAppendArgs,
  auditAppendTemplate,
  filledAuditBody,
  filledBySql,
  type AuditEvent,
} from '@mtg/audit';
import { prepared, runPrepared } from '@mtg/db';
import type { StoredResult } from './read-result.ts';

/**
 * A caller's first read of a completed task that also carries its result (a 2026-07-28
 * `tasks/get` under STATUS_READ_AUDIT=first-per-change), on the primary, in ONE statement:
 * - the caller's status-read mark, and `task.status_read` only if the mark is new (as
 *   audit-status-read.ts records it);
 * - the result, a delete-on-read one deleted by the same statement, so only one reader gets it;
 * - only if there was one, `task.result_read`, its size and whether it was deleted filled in
 *   from the row.
 * The events are appended in that order: the result's append waits for the status read's
 * count. The statement always returns one row (null columns when no result is stored), and
 * the outer side of its LEFT JOIN, evaluated first, is that count: the status read is
 * recorded whether or not a result is found. It was three round trips (the mark with its
 * event, the result, the grouped `task.result_read`): the mark's statement commits anyway, so
 * the other two ride on its commit. A read that records no status (a repeat, `tasks/result`)
 * keeps the grouped append, which shares its commit with other readers' events.
 */
const FIRST_READ_WITH_RESULT = prepared(
  `WITH mark AS (
     INSERT INTO app.status_read_marks (task_id, tenant, subject, client, status_version)
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING task_id),
   status_read AS (
     SELECT ${appendEventSql('$6', '$7')} AS seq FROM mark),
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
            ${appendEventSql(
              '$8',
              filledAuditBody(
                '$9',
                '$10',
                `jsonb_build_object('sizeBytes', got.size_bytes, 'deletedOnRead', got.delete_on_read)`,
              ),
            )} AS seq
       FROM found got CROSS JOIN (SELECT count(*) FROM status_read) s)
   SELECT r.result, r.is_error, r.size_bytes, r.delete_on_read
     FROM (SELECT count(*) FROM status_read) s LEFT JOIN result_read r ON true`,
);

/**
 * Records the caller's first read of `task`'s status, takes its result and records that read
 * (FIRST_READ_WITH_RESULT). `statusRead`: the `task.status_read` event, appended only if
 * this caller's mark for this status is new; `resultRead`: the `task.result_read` event,
 * whose `data` gets `sizeBytes` and `deletedOnRead` from the row. Undefined: no result is
 * stored any more (expired, or taken by another read); the status read is recorded all the
 * same, and the result's absence is the caller's to deny.
 */
export async function firstReadWithResult(
  pool: Pool,
  task: { id: string; status_version: number },
  reader: { tenant: string; subject: string; client: string },
  statusRead: AuditEvent,
  resultRead: AuditEvent,
): Promise<StoredResult | undefined> {
  const r = await runPrepared<{
    result: StoredResult['result'] | null;
    is_error: boolean;
    size_bytes: number;
    delete_on_read: boolean;
  }>(pool, FIRST_READ_WITH_RESULT, [
    task.id,
    reader.tenant,
    reader.subject,
    reader.client,
    task.status_version,
    ...auditAppendArgs(statusRead),
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
