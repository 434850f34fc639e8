import pg from 'pg';

/** Runs one query as the database owner (for assertions on what the system stored). */
export async function sql<T extends pg.QueryResultRow = any>(
  url: string,
  text: string,
  values: unknown[] = [],
): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}
