import type { Queryable } from '@mtg/db';
import { TENANT_REASON, type ReadScope } from './scope.ts';

export interface ActivityRow {
  seq: number;
  occurred_at: string;
  role: string;
  type: string;
  client: string | null;
  tool: string | null;
  task_id: string | null;
  reason: string | null;
  actor_subject: string | null;
}

/** Everything a principal of the tenant did or had done for them, newest first. */
export async function principalActivity(
  db: Queryable,
  scope: ReadScope,
  principal: string,
  limit = 1000,
): Promise<ActivityRow[]> {
  const { rows } = await db.query<ActivityRow>(
    `SELECT seq, occurred_at, role, type, client, tool, task_id, ${TENANT_REASON} AS reason,
            actor_subject
       FROM audit.principal_activity WHERE tenant = $1 AND principal = $2
      ORDER BY occurred_at DESC, chain_id DESC, seq DESC LIMIT $3`,
    [scope.tenant, principal, limit],
  );
  return rows;
}
