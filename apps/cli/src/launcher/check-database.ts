import pg from 'pg';

/** Where a URL points, without its password: safe for messages. */
export function describeDatabaseUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.username ? u.username + '@' : ''}${u.hostname}:${u.port || 5432}${u.pathname}`;
  } catch {
    return '(unparseable URL)';
  }
}

/** Connects once and runs SELECT 1; the error says where it tried and what to do. */
export async function checkDatabase(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (error) {
    const reason = messageOf(error);
    throw new Error(
      `cannot reach the database at DATABASE_URL (${describeDatabaseUrl(url)}): ${reason}. ` +
        'Start that PostgreSQL server or fix DATABASE_URL; unset it to use the embedded one.',
      { cause: error },
    );
  } finally {
    await client.end().catch(() => {});
  }
}

function messageOf(error: unknown): string {
  // Connection refused on a name with several addresses arrives as an AggregateError
  // with an empty message.
  if (error instanceof AggregateError && error.errors.length > 0) {
    return error.errors.map(messageOf).join('; ');
  }
  if (error instanceof Error)
    return error.message || (error as NodeJS.ErrnoException).code || error.name;
  return String(error);
}
