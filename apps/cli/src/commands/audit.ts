// npm run -s audit -- task <id> | denials [--since 7d] | principal <sub> | bundle (--task ID | --month YYYY-MM | --from T --to T)
//   [--tenant T] [--format table|csv|json] [--out FILE]
// The audit trail for people who prefer a terminal, read as the auditor role (docs/audit.md).
import { systemClock } from '@mtg/clock';
import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import {
  buildBundle,
  describeStatusReadPolicy,
  readStatusReadPolicy,
  type BundleSelection,
} from '@mtg/audit';
import { parseConfig, postgresUrl } from '@mtg/config';
import { z } from 'zod';
import { dataDir } from '@mtg/dev-secrets';
import {
  DENIAL_COLUMNS,
  denialsSince,
  PRINCIPAL_COLUMNS,
  principalEvents,
  TASK_COLUMNS,
  taskEvents,
} from '../audit/auditor-queries.ts';
import { CliError, messageOf, resolveDatabaseUrl } from '../audit/database.ts';
import { connectForReading } from '../audit/read-replica.ts';
import { formatRows, type RowFormat } from '../audit/format-rows.ts';
import { runCli } from '../lib/run-cli.ts';

const USAGE = `usage: npm run -s audit -- task <task-id>            [--tenant T] [--format table|csv|json]
       npm run -s audit -- denials [--since 7d|24h]    [--tenant T] [--format table|csv|json]
       npm run -s audit -- principal <sub>             [--tenant T] [--format table|csv|json]
       npm run -s audit -- bundle --task <task-id> | --month YYYY-MM | --from ISO --to ISO
                               [--tenant T] [--out FILE]

task: every event of one task in seq order. denials: every refusal since a time. principal:
everything a person did or had done for them. bundle: an evidence bundle (the events, their
hashes and the signed checkpoint that covers them) to verify offline with
\`npm run -s audit:verify -- --bundle FILE\`; with --tenant, other tenants' events in the range
are redacted to their hashes.

Database: DATABASE_URL, else the running embedded PostgreSQL of \`npm start\`; role
DATABASE_ROLE (default mtg_auditor, which reads the audit views only). DATABASE_READ_URL: a
hot standby to read instead, once it has replayed what the primary had when the command began
(waiting up to DATABASE_READ_MAX_LAG_MS, default 2000; else the primary is read).

Exit status: 0 done; 1 nothing found (task); 2 usage or configuration; 3 could not run.`;

const schema = z.object({
  DATABASE_URL: postgresUrl().optional(),
  DATABASE_ROLE: z.string().regex(/^\w+$/, 'must be a role name').default('mtg_auditor'),
  DATABASE_READ_URL: postgresUrl().optional(),
  DATABASE_READ_MAX_LAG_MS: z.coerce.number().int().min(0).max(600_000).default(2000),
});

function sinceOf(value: string, now: Date): Date {
  const m = /^([1-9]\d{0,4})([hd])$/.exec(value);
  if (m) return new Date(now.getTime() - Number(m[1]) * (m[2] === 'h' ? 3_600_000 : 86_400_000));
  const at = Date.parse(value);
  if (Number.isNaN(at))
    throw new CliError(`--since takes 24h, 7d … or an ISO 8601 time, not ${value}`);
  return new Date(at);
}

function selectionOf(v: {
  task?: string;
  month?: string;
  from?: string;
  to?: string;
  tenant?: string;
}): BundleSelection {
  const tenant = v.tenant ? { tenant: v.tenant } : {};
  const given = [
    v.task !== undefined,
    v.month !== undefined,
    v.from !== undefined || v.to !== undefined,
  ];
  if (given.filter(Boolean).length !== 1) {
    throw new CliError(
      'bundle takes exactly one of --task ID, --month YYYY-MM, or --from and --to',
    );
  }
  if (v.task !== undefined) return { kind: 'task', taskId: v.task, ...tenant };
  if (v.month !== undefined) {
    const m = /^(\d{4})-(0[1-9]|1[0-2])$/.exec(v.month);
    if (!m) throw new CliError(`--month takes YYYY-MM, not ${v.month}`);
    const y = Number(m[1]);
    const mo = Number(m[2]);
    return {
      kind: 'range',
      from: new Date(Date.UTC(y, mo - 1, 1)).toISOString(),
      to: new Date(Date.UTC(y, mo, 1)).toISOString(),
      ...tenant,
    };
  }
  const from = Date.parse(v.from ?? '');
  const to = Date.parse(v.to ?? '');
  if (Number.isNaN(from) || Number.isNaN(to) || from >= to) {
    throw new CliError('--from and --to take ISO 8601 times, --from before --to');
  }
  return {
    kind: 'range',
    from: new Date(from).toISOString(),
    to: new Date(to).toISOString(),
    ...tenant,
  };
}

async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      tenant: { type: 'string' },
      format: { type: 'string', default: 'table' },
      since: { type: 'string', default: '7d' },
      task: { type: 'string' },
      month: { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  const [command, argument, ...extra] = positionals;
  if (!command || !['task', 'denials', 'principal', 'bundle'].includes(command) || extra.length) {
    throw new CliError(
      command ? `unknown command or extra argument: ${positionals.join(' ')}` : 'give a command',
    );
  }
  if ((command === 'task' || command === 'principal') && !argument) {
    throw new CliError(
      `${command} takes ${command === 'task' ? 'a task id' : "a principal's sub"}`,
    );
  }
  if ((command === 'denials' || command === 'bundle') && argument) {
    throw new CliError(`${command} takes no positional argument (${argument})`);
  }
  const format = values.format as RowFormat;
  if (!['table', 'csv', 'json'].includes(format))
    throw new CliError('--format is table, csv or json');
  const selection = command === 'bundle' ? selectionOf(values) : undefined;
  const since = command === 'denials' ? sinceOf(values.since, systemClock()) : undefined;

  const config = parseConfig(schema, env);
  const { url, where } = await resolveDatabaseUrl(config.DATABASE_URL, dataDir(env));
  const client = await connectForReading({
    url,
    where,
    ...(config.DATABASE_READ_URL ? { readUrl: config.DATABASE_READ_URL } : {}),
    role: config.DATABASE_ROLE,
    name: 'audit-cli',
    maxWaitMs: config.DATABASE_READ_MAX_LAG_MS,
    note: (line) => process.stderr.write(`audit: ${line}\n`),
  });
  try {
    // On stderr, whatever the format: an auditor reading a task's reads must know whether a
    // missing task.status_read means no read (docs/audit.md, "Status reads").
    if (command !== 'denials')
      process.stderr.write(
        `audit: ${describeStatusReadPolicy(await readStatusReadPolicy(client))}\n`,
      );
    if (selection) {
      const built = await buildBundle(
        client,
        selection,
        values.tenant ? { visibleTenant: values.tenant } : {},
      );
      if (!built.ok) throw new CliError(built.message);
      const text = JSON.stringify(built.bundle, null, 2) + '\n';
      if (values.out) await writeFile(values.out, text);
      else process.stdout.write(text);
      const b = built.bundle;
      process.stderr.write(
        `audit: bundle of ${b.events.filter((e) => 'selected' in e && e.selected).length} selected event(s), chain runs ${b.chains.length ? b.chains.map((c) => `${c.chain}:${c.firstSeq}..${c.lastSeq}`).join(', ') : 'empty'}` +
          (b.checkpoint
            ? ''
            : ' — no signed checkpoint covers it yet: run npm run -s audit:checkpoint, then export again') +
          (values.out ? `, written to ${values.out}` : '') +
          '\n',
      );
      return 0;
    }
    if (command === 'task') {
      const rows = await taskEvents(client, argument!, values.tenant);
      process.stdout.write(formatRows(format, TASK_COLUMNS, rows));
      return rows.length ? 0 : 1;
    }
    if (command === 'denials') {
      const rows = await denialsSince(client, since!, values.tenant);
      process.stdout.write(formatRows(format, DENIAL_COLUMNS, rows));
      return 0;
    }
    const rows = await principalEvents(client, argument!, values.tenant);
    process.stdout.write(formatRows(format, PRINCIPAL_COLUMNS, rows));
    return 0;
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw new CliError(`could not read the audit views of ${where}: ${messageOf(error)}`, 3);
  } finally {
    await client.end().catch(() => {});
  }
}

runCli('audit', USAGE, () => main(process.argv.slice(2), process.env), { usageOnCliError: true });
