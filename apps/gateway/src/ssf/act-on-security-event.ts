import type { Pool } from '@mtg/db';
import type { Logger } from '@mtg/log';
import { restorePrincipal, revokePrincipal, type OnTaskEnded, type PrincipalRef } from '@mtg/tasks';
import type { SecurityEventAction } from './read-security-event.ts';

export interface ActedOn {
  eventType: string;
  kind: SecurityEventAction['kind'];
  /** revoke: the tasks stopped; restore: whether a revocation was lifted. */
  cancelledTasks?: string[];
  restored?: boolean;
  /** Why the event changed nothing: the principal was already revoked, or an administrator's revocation stands. */
  skipped?: 'already_revoked' | 'revoked_by_admin';
}

/**
 * Carries out the actions of one accepted SET, in order.
 *
 * - A revocation signal for a principal already revoked changes nothing: the first signal
 *   stopped the work and is what the tasks and the record name. (The IdP sends two for one
 *   disable — account-disabled, then session-revoked — and the second must not rewrite why
 *   the still-stopping tasks stop.)
 * - A revocation an administrator made through the gateway's admin API is the gateway's own
 *   decision: the IdP's account-enabled does not lift it; only the admin API does.
 */
export async function actOnSecurityEvent(
  pool: Pool,
  logger: Logger,
  event: {
    principal: PrincipalRef;
    actions: SecurityEventAction[];
    jti: string;
    iss: string;
    correlationId?: string;
  },
  /** Told about each task a revocation ends here (no live worker held it). */
  options: { onTaskEnded?: OnTaskEnded } = {},
): Promise<ActedOn[]> {
  const done: ActedOn[] = [];
  const detail = { jti: event.jti, iss: event.iss };
  for (const action of event.actions) {
    const base = { eventType: action.eventType, kind: action.kind };
    const standing = await revokedByPath(pool, event.principal);
    const skipped =
      action.kind === 'revoke' && standing
        ? 'already_revoked'
        : action.kind === 'restore' && standing === 'admin'
          ? 'revoked_by_admin'
          : undefined;
    if (skipped) {
      logger.info('security event changes nothing', {
        correlationId: event.correlationId,
        ...event.principal,
        path: action.path,
        skipped,
        revokedBy: standing,
      });
      done.push({ ...base, skipped });
      continue;
    }
    const source = {
      path: action.path,
      detail,
      ...(event.correlationId ? { correlationId: event.correlationId } : {}),
    };
    if (action.kind === 'revoke') {
      const cancelledTasks = await revokePrincipal(pool, event.principal, source, options);
      done.push({ ...base, cancelledTasks });
    } else {
      done.push({ ...base, restored: await restorePrincipal(pool, event.principal, source) });
    }
  }
  return done;
}

/** The path of the principal's standing revocation, if it is revoked. */
async function revokedByPath(pool: Pool, p: PrincipalRef): Promise<string | undefined> {
  const r = await pool.query<{ path: string }>(
    `SELECT revoked_by->>'path' AS path FROM app.principals
      WHERE tenant = $1 AND subject = $2 AND revoked`,
    [p.tenant, p.subject],
  );
  // A revoked row always names its path (revokePrincipal writes it); 'unknown' keeps it truthy.
  return r.rows[0] ? (r.rows[0].path ?? 'unknown') : undefined;
}
