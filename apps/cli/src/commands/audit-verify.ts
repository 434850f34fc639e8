// npm run -s audit:verify -- [--checkpoints FILE]... [--keys JWKS_FILE] [--from-checkpoint SEQ|latest] [--tenant T] [--json] [--record]
// npm run -s audit:verify -- --archive FILE [--keys JWKS_FILE] [--json]
// npm run -s audit:verify -- --bundle FILE [--keys JWKS_FILE] [--json]
// Verifies the audit chains and their signed checkpoints; exit 0 when intact, 1 naming the
// first bad event of each broken chain otherwise (docs/audit.md).
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import {
  AuditVerifyUsageError,
  verifyArchive,
  verifyAuditTrail,
  type VerifyAuditTrailReport,
} from '@mtg/audit';
import { parseConfig, postgresUrl } from '@mtg/config';
import { z } from 'zod';
import { dataDir } from '@mtg/dev-secrets';
import { readCheckpointFile } from '../audit/checkpoint-file.ts';
import { CliError, connect, messageOf, resolveDatabaseUrl } from '../audit/database.ts';
import { readJwks } from '../audit/key-files.ts';
import { devKeyPaths } from '../audit/signing-key-source.ts';
import { describeBundle, verifyBundleFile } from '../audit/verify-bundle-file.ts';
import { runCli } from '../lib/run-cli.ts';

const USAGE = `usage: npm run -s audit:verify -- [--checkpoints FILE]... [--keys JWKS_FILE]
                               [--from-checkpoint SEQ|latest] [--tenant T] [--json] [--record]
       npm run -s audit:verify -- --archive FILE [--keys JWKS_FILE] [--json]
       npm run -s audit:verify -- --bundle FILE [--keys JWKS_FILE] [--json]

Verifies each chain of audit.events (chain 0 for system events and the history from before
there were chains, one per tenant) in seq order (hash, link to the previous event, no gap,
query columns, tenant) and every signed checkpoint (audit.checkpoints, plus --checkpoints
files kept elsewhere) against the public keys (--keys, else AUDIT_JWKS_FILE, else the dev
keys in <DATA_DIR>/audit/jwks.json), and each checkpoint's head of every chain against that
chain. --tenant T verifies that tenant's chain alone. --from-checkpoint starts from a
verified checkpoint instead of the first event (archived months, or only what is new); SEQ
is the seq of chain 0's head in it (with --tenant, of the tenant's). --record stores the verdict in
audit.verifications (role mtg_audit_signer), where the metrics and alerts read it.

--archive FILE verifies a month exported by audit:archive, without a database: every event's
hash and link, the columns, the count, and the signed checkpoint of its last event.

--bundle verifies an evidence bundle (from the console or \`npm run -s audit -- bundle\`)
offline, with no database: every event's hash, every link, and the signed checkpoint that
ends it, against the public keys.

A warning (stderr) says when no signed checkpoint covers the head: a truncated tail or a
rehashed chain after the last checkpoint would then go unseen.

Database: DATABASE_URL, else the running embedded PostgreSQL of \`npm start\`; role
DATABASE_ROLE (default mtg_auditor, which reads the audit views only).

Exit status: 0 intact; 1 broken (the first line names the first bad event); 2 usage or
configuration; 3 could not run (database unreachable).`;

const schema = z.object({
  DATABASE_URL: postgresUrl().optional(),
  DATABASE_ROLE: z.string().regex(/^\w+$/, 'must be a role name').default('mtg_auditor'),
  AUDIT_JWKS_FILE: z.string().min(1).optional(),
});

async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      checkpoints: { type: 'string', multiple: true },
      keys: { type: 'string' },
      'from-checkpoint': { type: 'string' },
      'batch-size': { type: 'string' },
      json: { type: 'boolean' },
      bundle: { type: 'string' },
      archive: { type: 'string' },
      tenant: { type: 'string' },
      record: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  const config = parseConfig(schema, env);
  if (values.archive !== undefined && values.bundle !== undefined) {
    throw new CliError('give --archive or --bundle, not both');
  }
  if (values.archive !== undefined) {
    if (values.checkpoints || values['from-checkpoint'] || values.record || values.tenant)
      throw new CliError('--archive goes with --keys and --json only');
    const file =
      values.keys ?? config.AUDIT_JWKS_FILE ?? (await existing(devKeyPaths(dataDir(env)).jwksFile));
    if (!file)
      throw new CliError(
        "--archive needs the signing keys' public JWKS (--keys FILE or AUDIT_JWKS_FILE)",
      );
    return verifyArchiveFile(values.archive, await readJwks(file), values.json === true);
  }
  const from = values['from-checkpoint'];
  if (from !== undefined && from !== 'latest' && !/^[1-9]\d*$/.test(from)) {
    throw new CliError(`--from-checkpoint takes an event's seq or "latest", not ${from}`);
  }
  const batchSize = values['batch-size'] ? Number(values['batch-size']) : undefined;
  if (batchSize !== undefined && !(Number.isSafeInteger(batchSize) && batchSize > 0)) {
    throw new CliError('--batch-size takes a positive integer');
  }

  const keysFile =
    values.keys ?? config.AUDIT_JWKS_FILE ?? (await existing(devKeyPaths(dataDir(env)).jwksFile));
  const keys = keysFile ? await readJwks(keysFile) : undefined;
  if (values.bundle !== undefined) {
    if (values.checkpoints || from !== undefined || values.record || values.tenant) {
      throw new CliError(
        '--bundle verifies the bundle alone: it takes no --checkpoints, --from-checkpoint, --tenant or --record',
      );
    }
    if (!keys) {
      throw new CliError(
        "--bundle needs the checkpoint signing keys' public JWKS (--keys FILE or AUDIT_JWKS_FILE)",
      );
    }
    const result = await verifyBundleFile(values.bundle, keys);
    if (values.json) process.stdout.write(JSON.stringify(result, null, 2) + '\n');
    else
      for (const line of describeBundle(values.bundle, result)) process.stdout.write(line + '\n');
    return result.ok ? 0 : 1;
  }
  const external = [];
  for (const file of values.checkpoints ?? []) external.push(...(await readCheckpointFile(file)));

  const { url, where } = await resolveDatabaseUrl(config.DATABASE_URL, dataDir(env));
  const client = await connect(url, where, config.DATABASE_ROLE, 'audit-verify');
  let report: VerifyAuditTrailReport;
  try {
    report = await verifyAuditTrail(client, {
      ...(keys ? { keys } : {}),
      checkpoints: external,
      ...(from ? { fromCheckpoint: from === 'latest' ? 'latest' : Number(from) } : {}),
      ...(batchSize ? { batchSize } : {}),
      ...(values.tenant !== undefined ? { tenant: values.tenant } : {}),
    });
    if (values.record) {
      const failure = report.failure
        ? `${report.failure.code} at ${report.failure.seq} of chain ${report.failure.chain}: ${report.failure.message}`
        : (report.checkpointProblems[0]?.message ?? null);
      await client.query('SELECT audit.record_verification($1, $2, $3, $4)', [
        'verify',
        report.ok,
        report.lastSeq ?? report.events,
        failure,
      ]);
    }
  } catch (error) {
    if (error instanceof AuditVerifyUsageError) throw new CliError(error.message);
    throw new CliError(`verification could not run against ${where}: ${messageOf(error)}`, 3);
  } finally {
    await client.end().catch(() => {});
  }

  const warnings = uncoveredHead(report);
  for (const w of warnings) process.stderr.write(`audit:verify: warning: ${w}\n`);
  if (values.json) {
    process.stdout.write(
      JSON.stringify({ ...report, warnings, keys: keysFile ?? null }, null, 2) + '\n',
    );
  } else {
    for (const line of describe(report)) process.stdout.write(line + '\n');
  }
  return report.ok ? 0 : 1;
}

/**
 * A chain whose head no signed checkpoint covers verifies against itself only: someone who
 * can write the database could cut its tail or rewrite and rehash it after the last
 * checkpoint and still get "intact". Say so, and how to fix it.
 */
function uncoveredHead(r: VerifyAuditTrailReport): string[] {
  if (!r.ok) return [];
  const open = r.chains.filter((c) => c.lastSeq !== undefined && c.coveredSeq < c.lastSeq);
  if (open.length === 0) return [];
  const parts = open
    .slice(0, 5)
    .map((c) =>
      c.coveredSeq === 0
        ? `no signed checkpoint covers ${chainName(c)} (events ${c.firstSeq}..${c.lastSeq})`
        : `no signed checkpoint covers the head of ${chainName(c)}: events ${c.coveredSeq + 1}..${c.lastSeq} come after the latest checkpoint (event ${c.coveredSeq})`,
    );
  if (open.length > 5) parts.push(`and ${open.length - 5} more chains`);
  return [
    `${parts.join('; ')}, so a truncated tail or a rewritten and rehashed chain there would go unseen. ` +
      'Sign the heads with `npm run -s audit:checkpoint` (or keep it running with --every SECONDS) ' +
      'and keep a copy of the checkpoints outside the database (--out FILE).',
  ];
}

function chainName(c: { chain: number; tenant: string | null }): string {
  return c.chain === 0
    ? 'chain 0 (system)'
    : `chain ${c.chain} (tenant ${JSON.stringify(c.tenant)})`;
}

function describe(r: VerifyAuditTrailReport): string[] {
  const rate = `${Math.round(r.eventsPerSecond)} events/s`;
  const one = r.chains.length === 1 ? r.chains[0] : undefined;
  const range = one
    ? one.events > 0
      ? ` (seq ${one.firstSeq}..${one.lastSeq})`
      : ''
    : ` in ${r.chains.length} chains`;
  const start = r.anchor.seq > 0 ? `, from the checkpoint at event ${r.anchor.seq}` : '';
  const c = r.checkpoints;
  // With one chain, the checkpoint's head of it; otherwise how many heads it signs.
  const latest = c.latest
    ? ` (latest: ${one ? `event ${one.coveredSeq}` : `${c.latest.heads.length} chain heads`}, signed ${c.latest.signedAt}, key ${c.latest.keyId})`
    : '';
  const checkpoints = `${c.verified}/${c.total} checkpoints verified${latest}`;
  const which = one ? ` ${chainName(one).replace(/^chain /, '')}` : 's';
  if (r.ok) {
    return [
      `audit chain${which} intact: ${r.events} events${range}${start}, ${checkpoints}, ${rate} (${(r.elapsedMs / 1000).toFixed(2)} s)`,
    ];
  }
  const lines: string[] = [];
  for (const f of r.failures) {
    lines.push(`audit chain BROKEN at event ${f.seq} (${f.code}) in ${chainName(f)}: ${f.message}`);
  }
  for (const p of r.checkpointProblems) lines.push(`checkpoint problem (${p.code}): ${p.message}`);
  if (!one) {
    const shown = r.chains.slice(0, 20);
    for (const ch of shown) {
      lines.push(
        ch.ok
          ? `${chainName(ch)}: intact, ${ch.events} events${ch.events > 0 ? ` (seq ${ch.firstSeq}..${ch.lastSeq})` : ''}`
          : `${chainName(ch)}: BROKEN at event ${ch.failure!.seq} (${ch.failure!.code})`,
      );
    }
    if (r.chains.length > shown.length)
      lines.push(`… and ${r.chains.length - shown.length} more chains`);
  }
  lines.push(`checked ${r.events} events${range}${start}, ${checkpoints}, ${rate}`);
  return lines;
}

async function verifyArchiveFile(
  file: string,
  keys: Awaited<ReturnType<typeof readJwks>>,
  json: boolean,
): Promise<number> {
  try {
    await stat(file);
  } catch (error) {
    throw new CliError(`cannot read the archive ${file}: ${(error as NodeJS.ErrnoException).code}`);
  }
  const lines = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
  const v = await verifyArchive(lines, keys);
  if (json) process.stdout.write(JSON.stringify({ file, ...v }, null, 2) + '\n');
  else if (v.ok)
    process.stdout.write(
      `archive intact: ${v.header.partition}, ${v.header.chains.map((c) => `events ${c.firstSeq}..${c.lastSeq} (${c.events}) of chain ${c.chain}`).join(', ')}, ${v.checkpoints} checkpoint(s) verified\n`,
    );
  else
    process.stdout.write(
      `archive BROKEN${v.seq !== undefined ? ` at event ${v.seq}` : ''} (${v.code})${v.chain !== undefined ? ` in chain ${v.chain}` : ''}: ${v.message}\n`,
    );
  return v.ok ? 0 : 1;
}

async function existing(file: string): Promise<string | undefined> {
  try {
    await stat(file);
    return file;
  } catch {
    return undefined;
  }
}

runCli('audit:verify', USAGE, () => main(process.argv.slice(2), process.env));
