import pg from 'pg';
import type { AppRole } from './roles.ts';

/** A LOGIN role for one kind of process: a member of exactly one group role. */
export interface LoginRole {
  name: string;
  password: string;
  group: AppRole;
}

/**
 * Creates or updates LOGIN roles, each a member of its group role and of nothing else, with
 * no attribute beyond LOGIN (not superuser, no CREATEROLE/CREATEDB/REPLICATION/BYPASSRLS).
 * A session of such a role cannot `SET ROLE` to the owner or a superuser, nor set
 * `session_replication_role` (which would switch the append-only triggers off). Needs an
 * owner URL with CREATEROLE (a superuser). Idempotent: passwords are set again, memberships
 * other than the group revoked.
 *
 * Roles are cluster-wide, so several databases on one server share them unless their names
 * differ (the tests name them after their database).
 */
export async function provisionLoginRoles(ownerUrl: string, logins: LoginRole[]): Promise<void> {
  const client = new pg.Client({ connectionString: ownerUrl, application_name: 'provision' });
  await client.connect();
  try {
    for (const login of logins) await provision(client, login);
  } finally {
    await client.end();
  }
}

async function provision(client: pg.Client, login: LoginRole): Promise<void> {
  const existing = await client.query<{ rolsuper: boolean; self: boolean }>(
    'SELECT rolsuper, rolname = current_user AS self FROM pg_roles WHERE rolname = $1',
    [login.name],
  );
  const found = existing.rows[0];
  if (found && (found.rolsuper || found.self)) {
    // Never demote the identity that migrates, or a superuser that happens to share the name.
    throw new Error(
      `login role "${login.name}" is ${found.self ? 'the connecting role' : 'a superuser'}: ` +
        'choose another name for the application login',
    );
  }
  const name = pg.escapeIdentifier(login.name);
  if (!found) {
    // Two provisioners at once (tests on one server) may both try: tolerate the duplicate.
    await client.query(`CREATE ROLE ${name} LOGIN`).catch((error: { code?: string }) => {
      if (error.code !== '42710' && error.code !== '23505') throw error;
    });
  }
  await client.query(
    `ALTER ROLE ${name} WITH LOGIN INHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION ` +
      `NOBYPASSRLS PASSWORD ${client.escapeLiteral(login.password)}`,
  );
  const others = await client.query<{ rolname: string }>(
    `SELECT g.rolname FROM pg_auth_members m
       JOIN pg_roles g ON g.oid = m.roleid
       JOIN pg_roles u ON u.oid = m.member
      WHERE u.rolname = $1 AND g.rolname <> $2`,
    [login.name, login.group],
  );
  for (const { rolname } of others.rows) {
    await client.query(`REVOKE ${pg.escapeIdentifier(rolname)} FROM ${name}`);
  }
  await client.query(`GRANT ${pg.escapeIdentifier(login.group)} TO ${name}`);
}

/** Drops LOGIN roles made by provisionLoginRoles (tests: after their database is dropped). */
export async function dropLoginRoles(ownerUrl: string, names: string[]): Promise<void> {
  const client = new pg.Client({ connectionString: ownerUrl, application_name: 'provision' });
  await client.connect();
  try {
    for (const name of names)
      await client.query(`DROP ROLE IF EXISTS ${pg.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
}

/** `ownerUrl` with the login's name and password instead: same server, same database. */
export function loginUrl(ownerUrl: string, login: Pick<LoginRole, 'name' | 'password'>): string {
  const url = new URL(ownerUrl);
  url.username = encodeURIComponent(login.name);
  url.password = encodeURIComponent(login.password);
  return url.toString();
}
