import type { Queryable } from '@mtg/db';
import { appendAuditGrouped, type AuditPool } from './append-audit.ts';

/**
 * How the status reads of the trail were recorded, as the gateways declared it when they
 * started (`audit.policy` events, chain 0): an auditor must know whether the absence of a
 * `task.status_read` means no read, or only no read of a status the caller had already seen.
 */
export interface StatusReadPolicy {
  /** `first-per-change` or `all` (STATUS_READ_AUDIT); undefined: no gateway declared one. */
  policy?: string;
  /** The first start under that policy since the last start under another one. */
  since?: Date;
}

/** Records, at a gateway's start, the status-read policy it runs under. */
export async function declareStatusReadPolicy(
  pool: AuditPool,
  policy: string,
  gateway: string,
): Promise<void> {
  await appendAuditGrouped(pool, {
    type: 'audit.policy',
    actor: { subject: gateway, kind: 'system' },
    data: { statusReads: policy },
  });
}

/** How many recent declarations are read: enough for many restarts of many replicas. */
const RECENT = 1000;

/** The policy in force and since when, from the trail (the audit views: any auditor role). */
export async function readStatusReadPolicy(db: Queryable): Promise<StatusReadPolicy> {
  const { rows } = await db.query<{ occurred_at: Date; policy: string | null }>(
    `SELECT occurred_at, (body::jsonb) -> 'data' ->> 'statusReads' AS policy
       FROM audit.event_log WHERE type = 'audit.policy'
      ORDER BY occurred_at DESC LIMIT ${RECENT}`,
  );
  const latest = rows[0];
  if (!latest?.policy) return {};
  // The latest start decides (a rollout of another policy has its first replica's start as
  // its beginning); the run of starts under the same policy before it says since when.
  let since = latest.occurred_at;
  for (const row of rows) {
    if (row.policy !== latest.policy) break;
    since = row.occurred_at;
  }
  return { policy: latest.policy, since };
}

/** One line for people: what the console and `npm run audit` print. */
export function describeStatusReadPolicy(p: StatusReadPolicy): string {
  if (!p.policy)
    return 'status reads recorded: not declared in this trail (written by gateways before STATUS_READ_AUDIT); a missing task.status_read does not mean no read';
  const what =
    p.policy === 'all'
      ? 'every read'
      : p.policy === 'first-per-change'
        ? 'first per caller per status change (repeated reads of a status already seen are not events)'
        : p.policy;
  const since = p.since ? ` (policy since ${p.since.toISOString()})` : '';
  // Under either policy a read that also took the result is one event, that retrieval.
  return `status reads recorded: ${what}; a read that brought the result is its task.result_read${since}`;
}
