import type { Pool } from 'pg';
import { appendAuditInTransaction, type AuditEvent } from '@mtg/audit';
import {
  prepared,
  runPrepared,
  withTransaction,
  type PreparedStatement,
  type Queryable,
} from '@mtg/db';
import { cancelTaskNow, type CancelledBy } from './task-state/end-task.ts';
import { flagPrincipalTasks } from './task-state/request-cancel.ts';
import type { OnTaskEnded } from './task-state/settle-task.ts';

export interface PrincipalRef {
  tenant: string;
  subject: string;
}

/** How the revocation reached us: 'ssf:account-disabled', 'ssf:session-revoked', 'admin', … */
export interface RevocationSource {
  path: string;
  by?: { subject: string; client?: string };
  detail?: Record<string, unknown>;
  correlationId?: string;
}

/** Who acted, for the audit event: the administrator, or the signal's path. */
function actorOf(source: RevocationSource): AuditEvent['actor'] {
  return source.by
    ? {
        subject: source.by.subject,
        ...(source.by.client ? { client: source.by.client } : {}),
        kind: 'admin',
      }
    : { subject: source.path, kind: 'system' };
}

// What a revocation check reads of the principal's row (see revocationFromRow).
const REVOCATION_COLUMNS = (p: string) =>
  `${p}.revoked, floor(extract(epoch FROM ${p}.revoked_at))::bigint AS revoked_second`;

const REVOKED = prepared(
  `SELECT ${REVOCATION_COLUMNS('p')} FROM app.principals p WHERE tenant = $1 AND subject = $2`,
);

/**
 * A statement that checks a principal's revocation beside other work, in one round trip:
 * `WITH <cte>` (its one row named `name`), selecting the CTE's `columns` and the principal's
 * revocation columns (null when it has no row) for tenant `$<first>` and subject
 * `$<first + 1>`, the parameters after the CTE's own. Its row goes to revocationFromRow.
 * With `lateral`, the columns of that subquery's row too (all null when it finds none).
 */
export function revocationBeside(cte: {
  sql: string;
  name: string;
  columns: readonly string[];
  firstParameter: number;
  lateral?: string;
}): PreparedStatement {
  const t = cte.firstParameter;
  return prepared(
    `WITH ${cte.sql}
     SELECT ${cte.columns.map((c) => `c.${c}`).join(', ')}, ${REVOCATION_COLUMNS('p')}${cte.lateral ? ', beside.*' : ''}
       FROM ${cte.name} c LEFT JOIN app.principals p ON p.tenant = $${t} AND p.subject = $${t + 1}` +
      (cte.lateral ? ` LEFT JOIN LATERAL (${cte.lateral}) beside ON true` : ''),
  );
}

/**
 * Why a principal's token is no longer served:
 * - principal_revoked: the principal is revoked now;
 * - token_predates_revocation: it was restored, but this token was issued (`iat`) before the
 *   last revocation, or in the same second, or has no `iat` (CAEP `session-revoked`: a
 *   restore admits new tokens, never the old ones).
 */
export type Revocation = 'principal_revoked' | 'token_predates_revocation';

/** A principal, with the `iat` (epoch seconds) of the token it came with. */
export type TokenPrincipal = PrincipalRef & { issuedAt?: number };

export async function revocationOf(
  db: Queryable,
  p: TokenPrincipal,
): Promise<Revocation | undefined> {
  const r = await runPrepared<PrincipalRevocationRow>(db, REVOKED, [p.tenant, p.subject]);
  return revocationFromRow(r.rows[0], p);
}

/**
 * The principal's row as a revocation check reads it: `revoked`, and the epoch second of
 * `revoked_at` (both null when the principal has no row: revocationBeside).
 */
export interface PrincipalRevocationRow {
  revoked: boolean | null;
  revoked_second: string | null;
}

/** What revocationOf answers, from the principal's row (undefined or nulls: no row). */
export function revocationFromRow(
  row: PrincipalRevocationRow | undefined,
  p: TokenPrincipal,
): Revocation | undefined {
  if (!row) return undefined;
  if (row.revoked) return 'principal_revoked';
  // `iat` has whole seconds: a token of the revocation's own second may be older than it.
  if (
    row.revoked_second !== null &&
    (p.issuedAt === undefined || p.issuedAt <= Number(row.revoked_second))
  )
    return 'token_predates_revocation';
  return undefined;
}

export async function isRevoked(db: Queryable, p: TokenPrincipal): Promise<boolean> {
  return (await revocationOf(db, p)) !== undefined;
}

// One lock per principal, outside the key space of the other advisory locks (two-key form).
const PRINCIPAL_LOCK_SPACE = 7310;
const LOCK_EXCLUSIVE = prepared(
  `SELECT pg_advisory_xact_lock(${PRINCIPAL_LOCK_SPACE}, hashtext(length($1) || ':' || $1 || $2))`,
);
// A start takes it shared before it reads the revocation (app.start_admission, migration 200:
// create-task.ts), and holds it to commit: a revocation, which takes it exclusively first,
// either committed before that check and is seen by it, or starts after the start commits and
// so finds and stops what it made.

/**
 * Stops acting for a principal: marks it revoked, flags every open task of it for
 * cancellation with reason `revoked`, tells running workers at once (they stop at the
 * current step boundary), and settles at once the tasks no live worker holds. Returns the
 * affected task ids. Idempotent: revoking twice changes nothing the second time.
 */
export async function revokePrincipal(
  pool: Pool,
  p: PrincipalRef,
  source: RevocationSource,
  options: { onTaskEnded?: OnTaskEnded } = {},
): Promise<string[]> {
  const taskBy = {
    path: 'revocation',
    via: source.path,
    reason: `principal revoked (${source.path})`,
    ...(source.by ? { subject: source.by.subject, client: source.by.client } : {}),
  };
  const affected = await withTransaction(pool, async (c) => {
    // First: starts of this principal in flight either commit before this (and are found
    // below) or wait and see the revocation (revocationInTransaction).
    await runPrepared(c, LOCK_EXCLUSIVE, [p.tenant, p.subject]);
    // Idempotent: a second signal for an already revoked principal changes nothing (the
    // first revocation's path and time stand, and no second audit event is written).
    const marked = await c.query(
      `INSERT INTO app.principals (tenant, subject, revoked, revoked_at, revoked_by, updated_at)
       VALUES ($1, $2, true, now(), $3, now())
       ON CONFLICT (tenant, subject) DO UPDATE
         SET revoked = true, revoked_at = now(), revoked_by = $3, updated_at = now()
         WHERE NOT app.principals.revoked
       RETURNING 1`,
      [p.tenant, p.subject, JSON.stringify({ path: source.path, ...source.by, ...source.detail })],
    );
    if (marked.rowCount === 0) return [];
    const tasks = await flagPrincipalTasks(c, p, taskBy);
    await appendAuditInTransaction(c, {
      type: 'principal.revoked',
      tenant: p.tenant,
      subject: p.subject,
      reason: source.path,
      ...(source.correlationId ? { correlationId: source.correlationId } : {}),
      actor: actorOf(source),
      data: { openTasks: tasks, ...source.detail },
    });
    return tasks;
  });
  // Tasks that no live worker holds (queued, paused, or their worker died) stop here; the
  // running ones are settled by their worker at its next boundary (sweepRevoked is the net).
  await settleUnleased(pool, affected, taskBy, options);
  return affected;
}

/** Settles, as revoked, those of `taskIds` that no live worker holds. */
export async function settleUnleased(
  pool: Pool,
  taskIds: string[],
  by: CancelledBy,
  options: { onTaskEnded?: OnTaskEnded } = {},
): Promise<void> {
  for (const taskId of taskIds) {
    await cancelTaskNow(
      { pool, ...options },
      {
        taskId,
        by,
        message: `Cancelled: ${String(by.reason ?? 'principal revoked')}`,
        settledBy: 'no_live_worker',
        onlyUnleased: true,
      },
    );
  }
}

/** Lifts a revocation for new work. Tasks cancelled by it stay cancelled. */
export async function restorePrincipal(
  pool: Pool,
  p: PrincipalRef,
  source: RevocationSource,
): Promise<boolean> {
  return withTransaction(pool, async (c) => {
    const r = await c.query(
      `UPDATE app.principals SET revoked = false, restored_at = now(), restored_by = $3, updated_at = now()
        WHERE tenant = $1 AND subject = $2 AND revoked`,
      [p.tenant, p.subject, JSON.stringify({ path: source.path, ...source.by })],
    );
    if (r.rowCount === 0) return false;
    await appendAuditInTransaction(c, {
      type: 'principal.restored',
      tenant: p.tenant,
      subject: p.subject,
      reason: source.path,
      actor: actorOf(source),
      // What the administrator gave as the reason (the admin API's `reason`), as on a revoke.
      ...(source.detail ? { data: source.detail } : {}),
    });
    return true;
  });
}
