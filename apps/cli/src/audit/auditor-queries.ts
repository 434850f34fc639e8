import type pg from 'pg';

// What the auditor CLI reads, through the audit views only (mtg_auditor). `tenant` narrows
// to one tenant; unset, every tenant (an auditor of the whole deployment).

export const TASK_COLUMNS = [
  'seq',
  'occurred_at',
  'type',
  'tenant',
  'subject',
  'actor_subject',
  'actor_kind',
  'client',
  'tool',
  'reason',
  'data',
] as const;

export async function taskEvents(db: pg.ClientBase, taskId: string, tenant?: string) {
  const { rows } = await db.query<Record<string, unknown>>(
    `SELECT seq, occurred_at, type, tenant, subject, actor_subject, actor_kind, client, tool, reason, data
       FROM audit.task_timeline WHERE task_id = $1 AND ($2::text IS NULL OR tenant = $2) ORDER BY occurred_at, chain_id, seq`,
    [taskId, tenant ?? null],
  );
  return rows;
}

export const DENIAL_COLUMNS = [
  'seq',
  'occurred_at',
  'type',
  'tenant',
  'reason',
  'subject',
  'client',
  'tool',
  'verb',
  'task_id',
  'client_ip',
] as const;

export async function denialsSince(db: pg.ClientBase, since: Date, tenant?: string) {
  // audit.denials plus the client address (the body's origin.ip, which the view leaves out).
  const { rows } = await db.query<Record<string, unknown>>(
    `SELECT seq, occurred_at, type, tenant, reason, subject, client, tool,
            b -> 'data' ->> 'verb' AS verb, task_id, b -> 'origin' ->> 'ip' AS client_ip
       FROM (SELECT *, replace(body, '\\u0000', '\\ufffd')::jsonb AS b FROM audit.event_log
              WHERE type IN ('task.denied', 'auth.denied')) e
      WHERE occurred_at >= $1 AND ($2::text IS NULL OR tenant = $2) ORDER BY occurred_at, chain_id, seq`,
    [since, tenant ?? null],
  );
  return rows;
}

export const PRINCIPAL_COLUMNS = [
  'seq',
  'occurred_at',
  'tenant',
  'role',
  'type',
  'task_id',
  'tool',
  'client',
  'reason',
  'actor_subject',
] as const;

export async function principalEvents(db: pg.ClientBase, principal: string, tenant?: string) {
  const { rows } = await db.query<Record<string, unknown>>(
    `SELECT seq, occurred_at, tenant, role, type, task_id, tool, client, reason, actor_subject
       FROM audit.principal_activity WHERE principal = $1 AND ($2::text IS NULL OR tenant = $2)
      ORDER BY occurred_at, chain_id, seq`,
    [principal, tenant ?? null],
  );
  return rows;
}
