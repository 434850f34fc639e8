import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { databaseUrlFor } from '@mtg/db';
import { adminDatabaseUrl } from '../../../../test/support/database.ts';

/**
 * Copies a prepared database (CREATE DATABASE … TEMPLATE), so each tampering scenario
 * starts from the same chain without rebuilding it. The template must have no connections.
 */
export async function cloneDatabase(
  templateName: string,
): Promise<{ url: string; drop(): Promise<void> }> {
  const admin = adminDatabaseUrl();
  const name = `mtg_test_${randomBytes(6).toString('hex')}`;
  await adminQuery(
    admin,
    `CREATE DATABASE ${pg.escapeIdentifier(name)} TEMPLATE ${pg.escapeIdentifier(templateName)}`,
  );
  return {
    url: databaseUrlFor(admin, name),
    drop: () =>
      adminQuery(admin, `DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`),
  };
}

async function adminQuery(url: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}
