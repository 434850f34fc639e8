import { loginUrl, provisionLoginRoles, ROLES, type AppRole, type LoginRole } from '@mtg/db';
import { DATABASE_SERVICES, type DatabasePasswords, type DatabaseService } from '@mtg/dev-secrets';

// The processes of the stack that use the database (DATABASE_SERVICES) each connect with a
// LOGIN role of their own that is a member of its group role only: no application session
// is the owner or a superuser.

/** The URL each database process connects with. */
export type DatabaseUrls = Record<DatabaseService, string>;

const GROUP: Record<DatabaseService, AppRole> = {
  gateway: ROLES.gateway,
  worker: ROLES.worker,
  downstream: ROLES.downstream,
};

/** The login roles of `npm start` and docker-compose: `mtg_login_gateway` … */
export const STACK_LOGIN_PREFIX = 'mtg_login';

export function loginRoleName(prefix: string, service: DatabaseService): string {
  return `${prefix}_${service}`;
}

/**
 * Creates (or updates) the stack's login roles `<prefix>_gateway`, `<prefix>_worker`,
 * `<prefix>_downstream` with `passwords`, and returns the URL each process connects with:
 * the owner URL with the login's name and password. Needs the owner (superuser) URL, which
 * itself goes to no process.
 */
export async function provisionDatabaseLogins(
  ownerUrl: string,
  prefix: string,
  passwords: DatabasePasswords,
): Promise<DatabaseUrls> {
  const logins: Record<DatabaseService, LoginRole> = Object.fromEntries(
    DATABASE_SERVICES.map((s) => [
      s,
      { name: loginRoleName(prefix, s), password: passwords[s], group: GROUP[s] },
    ]),
  ) as Record<DatabaseService, LoginRole>;
  await provisionLoginRoles(ownerUrl, Object.values(logins));
  return Object.fromEntries(
    DATABASE_SERVICES.map((s) => [s, loginUrl(ownerUrl, logins[s])]),
  ) as DatabaseUrls;
}
