import type { Queryable } from '@mtg/db';
import type { ReadScope } from './scope.ts';

export interface RevocationRow {
  seq: number;
  occurred_at: string;
  type: string;
  subject: string | null;
  /** How it came: `admin` (the admin API), `ssf:account-disabled` (a security event), … */
  reason: string | null;
  /** What the operator typed as the reason, if anything. */
  note: string | null;
  actor_subject: string | null;
  actor_kind: string | null;
}

/** Principals revoked and restored in the tenant, newest first. */
export async function listRevocations(
  db: Queryable,
  scope: ReadScope,
  limit = 1000,
): Promise<RevocationRow[]> {
  const { rows } = await db.query<RevocationRow>(
    `SELECT seq, occurred_at, type, subject, reason, data ->> 'note' AS note, actor_subject,
            actor_kind
       FROM audit.identity_changes
      WHERE tenant = $1 AND type IN ('principal.revoked', 'principal.restored')
      ORDER BY occurred_at DESC, chain_id DESC, seq DESC LIMIT $2`,
    [scope.tenant, limit],
  );
  return rows;
}
