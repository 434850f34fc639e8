import type { Pool } from 'pg';
import { appendAuditGrouped, appendEventSql, auditAppendArgs, type AuditEvent } from '@mtg/audit';
import { prepared, runPrepared } from '@mtg/db';
import type { VerbContext } from './authorize-task.ts';
import type { VerbTaskRow } from './task-row.ts';

/**
 * Which status reads go to the audit trail (STATUS_READ_AUDIT, docs/audit.md, "Status reads").
 * `first-per-change`: the first read of each status by each caller (a poll loop's repeats of a
 * status it already told that caller are not events); `all`: every read. Result retrievals
 * and denials are recorded under either.
 */
export const STATUS_READ_AUDITS = ['first-per-change', 'all'] as const;
export type StatusReadAudit = (typeof STATUS_READ_AUDITS)[number];

/**
 * The mark and the event in ONE statement (one round trip, as the grouped append of `all`):
 * the event is appended only when this (task, caller, status version) had no mark yet, and
 * both commit together, so no replica of the gateway records a read another already did and
 * no read is marked without its event. A repeat inserts nothing and appends nothing.
 */
const FIRST_STATUS_READ = prepared(
  `WITH mark AS (
     INSERT INTO app.status_read_marks (task_id, tenant, subject, client, status_version)
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING RETURNING task_id)
   SELECT ${appendEventSql('$6', '$7')} AS seq FROM mark`,
);

/** Records (or, under `first-per-change`, perhaps not) that the caller read `row`'s status. */
export async function auditStatusRead(
  pool: Pool,
  policy: StatusReadAudit,
  row: VerbTaskRow & { status_read_marked?: boolean },
  ctx: VerbContext,
): Promise<void> {
  const p = ctx.principal;
  const event: AuditEvent = {
    type: 'task.status_read',
    taskId: row.id,
    tenant: p.tenant,
    subject: p.subject,
    client: p.client,
    tool: row.tool,
    correlationId: ctx.correlationId,
    // `recorded`: under which policy this event was kept, so that the trail itself tells an
    // auditor whether reads between two events may be missing from it.
    data: { wire: ctx.wire, status: row.status, recorded: policy },
  };
  if (policy === 'all') {
    await appendAuditGrouped(pool, event);
    return;
  }
  // Read with the row (authorize-task.ts): this caller's read of this status is recorded.
  if (row.status_read_marked === true) return;
  await runPrepared(pool, FIRST_STATUS_READ, [
    row.id,
    p.tenant,
    p.subject,
    p.client,
    row.status_version,
    ...auditAppendArgs(event),
  ]);
}
