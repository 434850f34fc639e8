import type { Queryable } from '@mtg/db';
import { TENANT_REASON, type ReadScope } from './scope.ts';

// audit.denials with the client address: the gateway records it as the body's top-level
// `origin.ip` (docs/audit.md), which the view does not expose, so read it from event_log
// (an auditor view too) with the same filter, served by the same partial index.
const DENIALS = `(SELECT seq, chain_id, occurred_at, type, tenant, subject, client, tool, task_id,
         ${TENANT_REASON} AS reason,
         b -> 'data' ->> 'verb' AS verb, b -> 'origin' ->> 'ip' AS client_ip
    FROM (SELECT *, replace(body, '\\u0000', '\\ufffd')::jsonb AS b FROM audit.event_log
           WHERE type IN ('task.denied', 'auth.denied')) e) d`;

export interface DenialRow {
  seq: number;
  occurred_at: string;
  type: string;
  subject: string | null;
  client: string | null;
  tool: string | null;
  task_id: string | null;
  reason: string | null;
  verb: string | null;
  client_ip: string | null;
}

export interface DenialPeriod {
  from: string;
  to: string;
}

/** Denials of the tenant in a period, newest first. */
export async function listDenials(
  db: Queryable,
  scope: ReadScope,
  period: DenialPeriod,
  limit = 1000,
): Promise<DenialRow[]> {
  const { rows } = await db.query<DenialRow>(
    `SELECT seq, occurred_at, type, subject, client, tool, task_id, reason, verb, client_ip
       FROM ${DENIALS}
      WHERE tenant = $1 AND occurred_at >= $2 AND occurred_at < $3
      ORDER BY occurred_at DESC, chain_id DESC, seq DESC LIMIT $4`,
    [scope.tenant, period.from, period.to, limit],
  );
  return rows;
}

export interface DenialBucket {
  bucket: string;
  reason: string;
  count: number;
}

/** Counts per time bucket (hour or day) and reason: the chart's series. */
export async function denialsOverTime(
  db: Queryable,
  scope: ReadScope,
  period: DenialPeriod,
  bucket: 'hour' | 'day',
): Promise<DenialBucket[]> {
  const { rows } = await db.query<DenialBucket>(
    `SELECT to_char(date_trunc($4, occurred_at AT TIME ZONE 'UTC'), 'YYYY-MM-DD"T"HH24:00"Z"') AS bucket,
            coalesce(reason, 'unknown') AS reason, count(*)::int AS count
       FROM ${DENIALS}
      WHERE tenant = $1 AND occurred_at >= $2 AND occurred_at < $3
      GROUP BY 1, 2 ORDER BY 1, 2`,
    [scope.tenant, period.from, period.to, bucket],
  );
  return rows;
}

export interface TopEntry {
  value: string;
  count: number;
}

/** The most denied subjects, clients and client addresses in the period. */
export async function topDenied(
  db: Queryable,
  scope: ReadScope,
  period: DenialPeriod,
  limit = 10,
): Promise<Record<'subjects' | 'clients' | 'clientIps', TopEntry[]>> {
  const top = async (expression: string) =>
    (
      await db.query<TopEntry>(
        `SELECT ${expression} AS value, count(*)::int AS count FROM ${DENIALS}
          WHERE tenant = $1 AND occurred_at >= $2 AND occurred_at < $3 AND ${expression} IS NOT NULL
          GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT $4`,
        [scope.tenant, period.from, period.to, limit],
      )
    ).rows;
  return {
    subjects: await top('subject'),
    clients: await top('client'),
    clientIps: await top('client_ip'),
  };
}
