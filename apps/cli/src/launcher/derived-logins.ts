import { createHmac } from 'node:crypto';
import { loginUrl, provisionLoginRoles, ROLES, type AppRole } from '@mtg/db';
import type { DevSecrets } from '@mtg/dev-secrets';

/**
 * The logins of `npm start` whose passwords dev-secrets.json does not hold: each is derived
 * from the admin token (an HMAC with a label of its own, like the SSF push authorization), so
 * it stays stable across restarts and needs no new entry.
 * - `console`: a member of mtg_console only. It reads the audit views, keeps its sessions and
 *   reads the queues summaries (packages/db/migrations/060_console.sql).
 * - `checkpoints`: the stack's checkpoint signer (`audit checkpoint --every`), a member of
 *   mtg_audit_signer only. It reads the chains and writes checkpoints, nothing else.
 */
const DERIVED = {
  console: { group: ROLES.console, label: 'console-login' },
  checkpoints: { group: ROLES.auditSigner, label: 'checkpoints-login' },
} as const satisfies Record<string, { group: AppRole; label: string }>;

export type DerivedLogin = keyof typeof DERIVED;

/** Creates (or updates) `<prefix>_console` and `<prefix>_checkpoints`; returns their URLs. */
export async function provisionDerivedLogins(
  ownerUrl: string,
  prefix: string,
  secrets: Pick<DevSecrets, 'idpAdminToken'>,
): Promise<Record<DerivedLogin, string>> {
  const logins = Object.entries(DERIVED).map(([process, { group, label }]) => ({
    process: process as DerivedLogin,
    login: {
      name: `${prefix}_${process}`,
      password: createHmac('sha256', secrets.idpAdminToken).update(label).digest('base64url'),
      group,
    },
  }));
  await provisionLoginRoles(
    ownerUrl,
    logins.map((l) => l.login),
  );
  return Object.fromEntries(
    logins.map(({ process, login }) => [process, loginUrl(ownerUrl, login)]),
  ) as Record<DerivedLogin, string>;
}
