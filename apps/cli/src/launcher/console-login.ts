import { createHmac } from 'node:crypto';
import { loginUrl, provisionLoginRoles, ROLES } from '@mtg/db';
import type { DevSecrets } from '@mtg/dev-secrets';

/**
 * The console's own LOGIN role, a member of mtg_console only: it reads the audit views, and
 * keeps its sessions and reads the queues summaries (packages/db/migrations/060_console.sql). Its password is derived from the admin token, like the SSF push
 * authorization, so dev-secrets.json needs no new entry and stays stable across restarts.
 */
export async function provisionConsoleLogin(
  ownerUrl: string,
  prefix: string,
  secrets: Pick<DevSecrets, 'idpAdminToken'>,
): Promise<string> {
  const login = {
    name: `${prefix}_console`,
    password: createHmac('sha256', secrets.idpAdminToken)
      .update('console-login')
      .digest('base64url'),
    group: ROLES.console,
  };
  await provisionLoginRoles(ownerUrl, [login]);
  return loginUrl(ownerUrl, login);
}
