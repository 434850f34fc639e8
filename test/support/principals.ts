import { sql } from './sql.ts';

/**
 * Marks a principal revoked (or restored) directly in app.principals, as a revocation by the
 * admin API or a Shared Signals event would leave it, without telling any process.
 */
export const setRevoked = (
  databaseUrl: string,
  subject: string,
  revoked: boolean,
  tenant = 'acme',
) =>
  sql(
    databaseUrl,
    `INSERT INTO app.principals (tenant, subject, revoked, revoked_at) VALUES ($3, $1, $2, now())
     ON CONFLICT (tenant, subject) DO UPDATE SET revoked = $2, revoked_at = now()`,
    [subject, revoked, tenant],
  );
