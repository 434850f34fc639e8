import { readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { describeDatabaseUrl } from '../launcher/check-database.ts';

export class CliError extends Error {
  /** 2: usage or configuration; 3: could not run (database unreachable …). */
  readonly exitCode: 2 | 3;
  constructor(message: string, exitCode: 2 | 3 = 2) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}

/**
 * DATABASE_URL when set; otherwise the running embedded cluster of `npm start`
 * (`<DATA_DIR>/postgres`: its port from postmaster.pid, its superuser password from the
 * file the launcher keeps there), so the audit commands work on the dev stack as they are.
 */
export async function resolveDatabaseUrl(
  databaseUrl: string | undefined,
  dataDir: string,
): Promise<{ url: string; where: string }> {
  if (databaseUrl) return { url: databaseUrl, where: describeDatabaseUrl(databaseUrl) };
  const cluster = path.join(dataDir, 'postgres');
  let port: string | undefined;
  let password: string;
  try {
    port = (await readFile(path.join(cluster, 'postmaster.pid'), 'utf8')).split('\n')[3]?.trim();
    password = (await readFile(path.join(cluster, 'embedded-superuser-password'), 'utf8')).trim();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new CliError(
      code === 'ENOENT'
        ? `DATABASE_URL is unset and the embedded PostgreSQL (${cluster}) is not running: start the stack with \`npm start\`, or set DATABASE_URL`
        : `DATABASE_URL is unset and the embedded PostgreSQL's files in ${cluster} cannot be read (${code}): set DATABASE_URL`,
    );
  }
  if (!port || !/^\d+$/.test(port)) {
    throw new CliError(
      `DATABASE_URL is unset and ${cluster}/postmaster.pid names no port: set DATABASE_URL`,
    );
  }
  return {
    url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    where: `embedded postgres on port ${port}`,
  };
}

/** One connection under `role` (SET at startup, like the apps' pools). */
export async function connect(
  url: string,
  where: string,
  role: string | undefined,
  name: string,
): Promise<pg.Client> {
  const client = new pg.Client({
    connectionString: url,
    application_name: name,
    connectionTimeoutMillis: 5000,
    ...(role ? { options: `-c role=${role}` } : {}),
  });
  client.on('error', () => {}); // surfaced by the query that fails
  try {
    await client.connect();
  } catch (error) {
    const hint = where.startsWith('embedded') ? ' (is `npm start` running?)' : '';
    throw new CliError(`cannot connect to ${where}${hint}: ${messageOf(error)}`, 3);
  }
  return client;
}

export function messageOf(error: unknown): string {
  // undefined_table / undefined_function: a database the audit migrations never reached.
  const code = (error as { code?: unknown }).code;
  if (code === '42P01' || code === '42883') {
    return `${(error as Error).message} (run \`npm run migrate\` against it)`;
  }
  if (error instanceof AggregateError && error.errors.length > 0) {
    return error.errors.map(messageOf).join('; ');
  }
  if (error instanceof Error)
    return error.message || (error as NodeJS.ErrnoException).code || error.name;
  return String(error);
}
