import { filledBySql } from '@mtg/audit';
import type { VerbTaskRow } from '../task-row.ts';

/** Who and what a task's audit events are about, as its row records them. */
export function aboutTask(row: VerbTaskRow) {
  return {
    taskId: row.id,
    tenant: row.tenant,
    subject: row.subject,
    client: row.client,
    tool: row.tool,
    correlationId: row.correlation_id,
  };
}

/**
 * `aboutTask` but for the task id, each filled in by the statement that appends the event
 * from the row it changes (`auditAppendTemplate`), with `aboutFilledValues` of that row.
 */
export const ABOUT_FILLED = {
  tenant: filledBySql('tenant'),
  subject: filledBySql('subject'),
  client: filledBySql('client'),
  tool: filledBySql('tool'),
  correlationId: filledBySql('correlationId'),
};

/** The values of ABOUT_FILLED from the app.tasks row `alias`, as jsonb. */
export const aboutFilledValues = (alias: string) =>
  `jsonb_build_object('tenant', ${alias}.tenant, 'subject', ${alias}.subject, ` +
  `'client', ${alias}.client, 'tool', ${alias}.tool, 'correlationId', ${alias}.correlation_id)`;
