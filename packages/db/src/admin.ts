import pg from 'pg';

/** The same server URL with another database name. */
export function databaseUrlFor(baseUrl: string, database: string): string {
  const u = new URL(baseUrl);
  u.pathname = '/' + database;
  return u.toString();
}

/** Drops (if present) and creates a database; used by tests and the embedded launcher. */
export async function recreateDatabase(adminUrl: string, database: string): Promise<string> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const name = pg.escapeIdentifier(database);
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  return databaseUrlFor(adminUrl, database);
}
