// `npm run migrate`: prepares DATABASE_URL for the apps — packages/db/migrations, then the job
// queue, then (given their passwords) the processes' login roles — and says what it did.
// The compose `migrate` service runs it before the apps.
//   `npm run migrate -- status`     each migration applied / pending, with its checksum state;
//                                   exits 1 when an applied file changed
//   `npm run migrate -- --dry-run`  prints the SQL migrate would apply; applies nothing
// An applied migration whose file changed stops migrate (and every app start) with exit 2.
import { ConfigError, parseConfig, postgresUrl } from '@mtg/config';
import {
  MigrationChangedError,
  MIGRATIONS_DIR,
  migrationStatus,
  pendingMigrations,
  provisionLoginRoles,
  ROLES,
} from '@mtg/db';
import { createLogger } from '@mtg/log';
import { z } from 'zod';
import { describeDatabaseUrl } from '../launcher/check-database.ts';
import { prepareDatabase } from '../launcher/prepare-database.ts';
import { DATABASE_SERVICES, type DatabasePasswords, type DatabaseService } from '@mtg/dev-secrets';
import {
  loginRoleName,
  provisionDatabaseLogins,
  STACK_LOGIN_PREFIX,
} from '../launcher/database-logins.ts';
import { exitWhenWritten } from '../lib/exit-when-written.ts';

const password = () => z.string().min(16, 'must be at least 16 characters').optional();
const PASSWORD_VARIABLES = {
  gateway: 'GATEWAY_DATABASE_PASSWORD',
  worker: 'WORKER_DATABASE_PASSWORD',
  downstream: 'DOWNSTREAM_DATABASE_PASSWORD',
} as const satisfies Record<DatabaseService, string>;

const schema = z
  .object({
    DATABASE_URL: postgresUrl('is required (postgres://user:password@host:port/database)'),
    /** With all three: create or update the LOGIN roles mtg_login_gateway … with them. */
    GATEWAY_DATABASE_PASSWORD: password(),
    WORKER_DATABASE_PASSWORD: password(),
    DOWNSTREAM_DATABASE_PASSWORD: password(),
    /** The console's login, mtg_login_console in mtg_console (a process that may not run). */
    CONSOLE_DATABASE_PASSWORD: password(),
  })
  .superRefine((c, ctx) => {
    const given = Object.values(PASSWORD_VARIABLES).filter((v) => c[v] !== undefined);
    if (given.length === 0 || given.length === DATABASE_SERVICES.length) return;
    for (const v of Object.values(PASSWORD_VARIABLES)) {
      if (c[v] === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: [v],
          message: `is required with ${given.join(', ')}: every process gets its own login`,
        });
      }
    }
  });

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const command = args.join(' ');
  if (command !== '' && command !== 'status' && command !== '--dry-run') {
    process.stderr.write(
      `migrate: unknown arguments "${command}" (usage: migrate [status | --dry-run])\n`,
    );
    return 2;
  }
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
  if (command === 'status') return status(config.DATABASE_URL, where);
  if (command === '--dry-run') return dryRun(config.DATABASE_URL, where);
  let result;
  let logins: string[] = [];
  try {
    // The summary below is this command's output; no log lines.
    result = await prepareDatabase(config.DATABASE_URL, createLogger('migrate', { silent: true }));
    if (config.GATEWAY_DATABASE_PASSWORD) {
      const passwords = Object.fromEntries(
        DATABASE_SERVICES.map((s) => [s, config[PASSWORD_VARIABLES[s]]!]),
      ) as DatabasePasswords;
      await provisionDatabaseLogins(config.DATABASE_URL, STACK_LOGIN_PREFIX, passwords);
      logins = DATABASE_SERVICES.map((s) => loginRoleName(STACK_LOGIN_PREFIX, s));
    }
    if (config.CONSOLE_DATABASE_PASSWORD) {
      const name = `${STACK_LOGIN_PREFIX}_console`;
      await provisionLoginRoles(config.DATABASE_URL, [
        { name, password: config.CONSOLE_DATABASE_PASSWORD, group: ROLES.console },
      ]);
      logins.push(name);
    }
  } catch (error) {
    process.stderr.write(`migrate: ${where}: ${messageOf(error)}\n`);
    return error instanceof MigrationChangedError ? 2 : 1;
  }
  for (const file of result.checksumsRecorded)
    process.stdout.write(`checksum recorded for ${file} (applied before checksums existed)\n`);
  for (const file of result.applied) process.stdout.write(`applied ${file}\n`);
  process.stdout.write(
    `${where}: ${result.applied.length} migration(s) applied, ` +
      `${result.alreadyApplied} already applied before; job queues installed: ${result.queues.join(', ')}\n`,
  );
  if (logins.length) process.stdout.write(`login roles ready: ${logins.join(', ')}\n`);
  return 0;
}

/** One line per migration: state, when applied, checksum state. 1 when a file changed. */
async function status(url: string, where: string): Promise<number> {
  const entries = await migrationStatus(url, MIGRATIONS_DIR);
  const width = Math.max(...entries.map((e) => e.version.length));
  for (const e of entries) {
    const at = e.appliedAt ? e.appliedAt.toISOString() : '-';
    const sum = e.checksum ? `checksum ${e.checksum}` : '';
    process.stdout.write(
      `${e.version.padEnd(width)}  ${e.state.padEnd(14)}  ${at.padEnd(24)}  ${sum}`.trimEnd() +
        '\n',
    );
  }
  const count = (f: (e: (typeof entries)[number]) => boolean) => entries.filter(f).length;
  const changed = entries.filter((e) => e.checksum === 'changed').map((e) => e.version);
  process.stdout.write(
    `${where}: ${count((e) => e.state === 'applied')} applied ` +
      `(checksum ok ${count((e) => e.checksum === 'ok')}, changed ${changed.length}, ` +
      `unrecorded ${count((e) => e.checksum === 'unrecorded')}), ${count((e) => e.state === 'pending')} pending` +
      `${count((e) => e.state === 'not_in_release') ? `, ${count((e) => e.state === 'not_in_release')} not in this release` : ''}\n`,
  );
  if (!changed.length) return 0;
  process.stderr.write(`migrate: ${new MigrationChangedError(changed).message}\n`);
  return 1;
}

/** The SQL migrate would apply, file by file; nothing is applied. */
async function dryRun(url: string, where: string): Promise<number> {
  let pending;
  try {
    pending = await pendingMigrations(url, MIGRATIONS_DIR);
  } catch (error) {
    if (!(error instanceof MigrationChangedError)) throw error;
    process.stderr.write(`migrate: ${where}: ${error.message}\n`);
    return 2;
  }
  for (const file of pending) {
    process.stdout.write(`-- ${file.version} (sha256 ${file.checksum})\n${file.sql.trimEnd()}\n\n`);
  }
  process.stdout.write(
    `-- ${where}: dry run, nothing applied: ${pending.length} migration(s) pending` +
      `${pending.length ? ` (${pending.map((f) => f.version).join(', ')})` : ''}\n`,
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
  (code) => exitWhenWritten(code),
  (error: unknown) => {
    process.stderr.write(`migrate: ${error instanceof Error ? error.stack : String(error)}\n`);
    exitWhenWritten(1);
  },
);
