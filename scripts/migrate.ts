// `npm run migrate`: applies db/migrations to DATABASE_URL and says what it did.
import { ConfigError, parseConfig } from '@mtg/config';
import { migrate } from '@mtg/db';
import { z } from 'zod';
import { describeDatabaseUrl } from './lib/launcher/check-database.ts';
import { MIGRATIONS_DIR } from './lib/launcher/prepare-database.ts';

const schema = z.object({
  DATABASE_URL: z
    .string({ error: 'is required (postgres://user:password@host:port/database)' })
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL'),
});

async function main(): Promise<number> {
  let config;
  try {
    config = parseConfig(schema, process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`migrate: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
  const where = describeDatabaseUrl(config.DATABASE_URL);
  let result;
  try {
    result = await migrate(config.DATABASE_URL, MIGRATIONS_DIR);
  } catch (error) {
    process.stderr.write(`migrate: ${where}: ${messageOf(error)}\n`);
    return 1;
  }
  for (const file of result.applied) process.stdout.write(`applied ${file}\n`);
  process.stdout.write(
    `${where}: ${result.applied.length} migration(s) applied, ` +
      `${result.alreadyApplied} already applied before\n`,
  );
  return 0;
}

function messageOf(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) {
    return error.errors.map(messageOf).join('; ');
  }
  return error instanceof Error ? error.message : String(error);
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`migrate: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
