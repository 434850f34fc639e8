// `npm run migrate`: prepares DATABASE_URL for the apps — db/migrations, then the job
// queue — and says what it did. The compose `migrate` service runs it before the apps.
import { ConfigError, parseConfig } from '@mtg/config';
import { createLogger } from '@mtg/log';
import { z } from 'zod';
import { describeDatabaseUrl } from './lib/launcher/check-database.ts';
import { prepareDatabase } from './lib/launcher/prepare-database.ts';

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
    // The summary below is this command's output; no log lines.
    result = await prepareDatabase(config.DATABASE_URL, createLogger('migrate', { silent: true }));
  } catch (error) {
    process.stderr.write(`migrate: ${where}: ${messageOf(error)}\n`);
    return 1;
  }
  for (const file of result.applied) process.stdout.write(`applied ${file}\n`);
  process.stdout.write(
    `${where}: ${result.applied.length} migration(s) applied, ` +
      `${result.alreadyApplied} already applied before; job queues installed: ${result.queues.join(', ')}\n`,
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
