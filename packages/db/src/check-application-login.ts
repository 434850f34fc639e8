import type { Queryable } from './with-transaction.ts';

export type ApplicationLoginErrorCode = 'wrong_role' | 'privileged_login';

/** A process's database connection is not what it must be; the message says what to do. */
export class ApplicationLoginError extends Error {
  readonly code: ApplicationLoginErrorCode;
  constructor(code: ApplicationLoginErrorCode, message: string) {
    super(message);
    this.name = 'ApplicationLoginError';
    this.code = code;
  }
}

/**
 * Run by each process at start, on a connection of its pool. Proves the session runs as
 * `role` (createPool's startup `role` failing would leave queries running as the login),
 * and refuses a login that could leave that role for more: a superuser, a member of one, or
 * a member of the database's or the audit schema's owner. From such a session `SET ROLE`
 * reaches the owner and `session_replication_role = replica` switches the append-only
 * triggers off, so the database's refusals would protect nothing.
 */
export async function checkApplicationLogin(db: Queryable, role: string): Promise<void> {
  const { rows } = await db.query<{ role: string; login: string; privileged: boolean }>(
    `SELECT current_user AS role, session_user AS login,
            EXISTS (SELECT 1 FROM pg_roles s
                     WHERE s.rolsuper AND pg_has_role(session_user, s.oid, 'MEMBER'))
            OR pg_has_role(session_user, (SELECT datdba FROM pg_database
                                           WHERE datname = current_database()), 'MEMBER')
            OR COALESCE(pg_has_role(session_user, (SELECT nspowner FROM pg_namespace
                                                    WHERE nspname = 'audit'), 'MEMBER'), false)
              AS privileged`,
  );
  const row = rows[0]!;
  if (row.privileged) {
    throw new ApplicationLoginError(
      'privileged_login',
      `database login "${row.login}" is a superuser or can become the database owner, so ` +
        `this process could leave ${role} and alter the audit trail: connect with a LOGIN ` +
        `role that is a member of ${role} only, and keep the owner for migrations ` +
        `(docs/operations.md, "Database roles")`,
    );
  }
  if (row.role !== role) {
    throw new ApplicationLoginError(
      'wrong_role',
      `database connection runs as "${row.role}", not "${role}": run the migrations ` +
        `(npm run migrate) and make sure the login role may SET ROLE ${role}`,
    );
  }
}
