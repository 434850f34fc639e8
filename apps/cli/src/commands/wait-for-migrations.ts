// Waits until DATABASE_URL is migrated for this release (every file of packages/db/migrations
// applied), then exits 0: the init container of the Kubernetes Deployments, so the apps
// start only after the migrations Job. Exits 1 after WAIT_TIMEOUT_SECONDS with the last
// reason, 2 on invalid configuration.
import { ConfigError, parseConfig, postgresUrl } from '@mtg/config';
import { checkSchemaVersion, MigrationChangedError } from '@mtg/db';
import { z } from 'zod';
import { exitWhenWritten } from '../lib/exit-when-written.ts';

const schema = z.object({
  DATABASE_URL: postgresUrl('is required (postgres://user:password@host:port/database)'),
  WAIT_TIMEOUT_SECONDS: z.coerce.number().int().min(1).default(600),
  WAIT_INTERVAL_MS: z.coerce.number().int().min(50).default(2000),
});

async function main(): Promise<number> {
  let config;
  try {
    config = parseConfig(schema, process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`wait-for-migrations: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
  const until = performance.now() + config.WAIT_TIMEOUT_SECONDS * 1000;
  let last = '';
  for (;;) {
    try {
      await checkSchemaVersion(config.DATABASE_URL);
      process.stdout.write('wait-for-migrations: the database is migrated for this release\n');
      return 0;
    } catch (error) {
      // Waiting does not mend an edited migration: say so at once.
      if (error instanceof MigrationChangedError) {
        process.stderr.write(`wait-for-migrations: ${error.message}\n`);
        return 2;
      }
      const reason = error instanceof Error ? error.message : String(error);
      if (reason !== last) process.stdout.write(`wait-for-migrations: waiting: ${reason}\n`);
      last = reason;
    }
    if (performance.now() >= until) {
      process.stderr.write(
        `wait-for-migrations: gave up after ${config.WAIT_TIMEOUT_SECONDS}s: ${last}\n`,
      );
      return 1;
    }
    await new Promise((r) => setTimeout(r, config.WAIT_INTERVAL_MS));
  }
}

main().then(
  (code) => exitWhenWritten(code),
  (error: unknown) => {
    process.stderr.write(
      `wait-for-migrations: ${error instanceof Error ? error.stack : String(error)}\n`,
    );
    exitWhenWritten(1);
  },
);
