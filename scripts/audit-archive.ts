// npm run -s audit:archive -- --out DIR
// The archival job (a monthly CronJob in deploy/kubernetes): signs a checkpoint of the chain
// head, then for each closed month, oldest first: signs its last event, exports it as JSON
// Lines with the checkpoints that bound it, verifies the export, records it, and only then
// detaches its partition (docs/audit.md, "Archival").
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import {
  createCheckpoint,
  ensurePartitions,
  exportMonth,
  verifyArchive,
  type MonthBounds,
} from '@mtg/audit';
import { parseConfig } from '@mtg/config';
import type { JSONWebKeySet } from 'jose';
import type pg from 'pg';
import { z } from 'zod';
import { dataDir } from './lib/dev-secrets.ts';
import { CliError, connect, messageOf, resolveDatabaseUrl } from './lib/audit/database.ts';
import { readJwks } from './lib/audit/key-files.ts';
import { loadSigningKeySource } from './lib/audit/signing-key-source.ts';
import { runCli } from './lib/run-cli.ts';

const USAGE = `usage: npm run -s audit:archive -- --out DIR

Signs a checkpoint of the audit chain head; then, for every closed month still attached
(oldest first): signs its last event, writes DIR/<partition>.jsonl (a header, the checkpoints
that bound the month, its events), verifies that file as \`audit:verify --archive\` would,
records it in audit.archives and the verdict in audit.verifications, and detaches the
partition. A month whose export does not verify is not detached (exit 1). The detached
tables stay in the database until you drop them, once the files are stored safely.

Database: DATABASE_URL, the owner (detaching is the owner's). Key: AUDIT_SIGNING_KEY_FILE or
AUDIT_SIGNING_KEY, as for audit:checkpoint; AUDIT_JWKS_FILE: the public keys of earlier
checkpoints.

Exit status: 0 done (or nothing to archive); 1 an export or the chain does not verify;
2 usage or configuration; 3 could not run.`;

const schema = z.object({
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
  AUDIT_SIGNING_KEY: z.string().min(1).optional(),
  AUDIT_SIGNING_KEY_FILE: z.string().min(1).optional(),
  AUDIT_JWKS_FILE: z.string().min(1).optional(),
  NODE_ENV: z.string().optional(),
});

async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { out: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  if (!values.out) throw new CliError('--out DIR is required (where the month files go)');
  const config = parseConfig(schema, env);
  const source = await loadSigningKeySource({ ...config, dataDir: dataDir(env) });
  const trustedFile = config.AUDIT_JWKS_FILE ?? source.devJwksFile;
  const trusted: JSONWebKeySet = trustedFile ? await readJwks(trustedFile) : { keys: [] };
  const keys: JSONWebKeySet = {
    keys: [...trusted.keys.filter((k) => k.kid !== source.key.keyId), source.key.publicJwk],
  };
  await mkdir(values.out, { recursive: true });

  const { url, where } = await resolveDatabaseUrl(config.DATABASE_URL, dataDir(env));
  const client = await connect(url, where, undefined, 'audit-archive');
  try {
    const sign = async (seq?: number) => {
      const r = await createCheckpoint(client, {
        key: source.key,
        trustedKeys: keys,
        ...(seq !== undefined ? { seq } : {}),
        now: () => new Date(),
      });
      if (!r.ok && r.code !== 'empty') {
        await record(client, false, seq ?? null, r.message);
        throw new ArchiveFailed(`cannot sign a checkpoint: ${r.message}`);
      }
      return r.ok ? r.checkpoint : undefined;
    };
    await ensurePartitions(client);
    const head = await sign();
    if (head) say(`signed the chain head: event ${head.seq}`);

    let archived = 0;
    for (const month of await closedMonths(client)) {
      const last = await sign(month.lastSeq);
      const boundaries = await client.query<{ seq: string; hash: string; jws: string }>(
        `SELECT DISTINCT ON (seq) seq, hash, jws FROM audit.checkpoints
          WHERE (seq = $1 AND hash = $2) OR (seq = $3 AND hash = $4)
          ORDER BY seq, id DESC`,
        [month.firstSeq - 1, month.firstPrevHash, month.lastSeq, month.lastHash],
      );
      const checkpoints = boundaries.rows.map((r) => ({
        seq: Number(r.seq),
        hash: r.hash,
        jws: r.jws,
      }));
      if (last && !checkpoints.some((c) => c.seq === month.lastSeq)) {
        checkpoints.push({ seq: last.seq, hash: last.hash, jws: last.jws });
      }
      const file = path.join(values.out, `${month.partition}.jsonl`);
      const partial = `${file}.partial`;
      const { events, sha256 } = await writeExport(client, month, checkpoints, partial);
      const verdict = await verifyArchive(lines(partial), keys);
      if (!verdict.ok) {
        await record(client, false, month.lastSeq, `${month.partition}: ${verdict.message}`);
        throw new ArchiveFailed(
          `${month.partition}: the export does not verify (${verdict.code}): ${verdict.message}; nothing detached, the export is left in ${partial}`,
        );
      }
      await rename(partial, file);
      await client.query(
        `INSERT INTO audit.archives (partition, first_seq, last_seq, events, checkpoint_seq, sha256, file)
         VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [
          month.partition,
          month.firstSeq,
          month.lastSeq,
          events,
          month.lastSeq,
          sha256,
          path.basename(file),
        ],
      );
      await record(client, true, month.lastSeq, null);
      await client.query('SELECT audit.detach_month($1::date)', [month.rangeFrom.slice(0, 10)]);
      say(
        `archived ${month.partition}: events ${month.firstSeq}..${month.lastSeq} (${events}) to ${file}, sha256 ${sha256}; partition detached`,
      );
      archived++;
    }
    if (archived === 0) say('no closed month to archive');
    return 0;
  } catch (error) {
    if (error instanceof ArchiveFailed) {
      process.stderr.write(`audit:archive: ${error.message}\n`);
      return 1;
    }
    if (error instanceof CliError) throw error;
    throw new CliError(`archival failed against ${where}: ${messageOf(error)}`, 3);
  } finally {
    await client.end().catch(() => {});
  }
}

class ArchiveFailed extends Error {}

const say = (line: string) => process.stdout.write(`audit:archive: ${line}\n`);

/** Attached, non-empty months before the head's month, oldest first. */
async function closedMonths(client: pg.Client): Promise<MonthBounds[]> {
  const { rows } = await client.query<{
    partition: string;
    range_from: Date;
    range_to: Date;
    first_seq: string | null;
    first_prev_hash: string;
    last_seq: string;
    last_hash: string;
  }>(
    `SELECT b.* FROM audit.partition_bounds() b,
            (SELECT date_trunc('month', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS month
               FROM audit.events ORDER BY occurred_at DESC, seq DESC LIMIT 1) head
      WHERE b.range_to <= head.month AND b.first_seq IS NOT NULL
      ORDER BY b.range_from`,
  );
  return rows.map((r) => ({
    partition: r.partition,
    rangeFrom: r.range_from.toISOString(),
    rangeTo: r.range_to.toISOString(),
    firstSeq: Number(r.first_seq),
    firstPrevHash: r.first_prev_hash,
    lastSeq: Number(r.last_seq),
    lastHash: r.last_hash,
  }));
}

async function writeExport(
  client: pg.Client,
  month: MonthBounds,
  checkpoints: Array<{ seq: number; hash: string; jws: string }>,
  file: string,
): Promise<{ events: number; sha256: string }> {
  await rm(file, { force: true });
  const handle = await open(file, 'wx', 0o600);
  const digest = createHash('sha256');
  try {
    const { events } = await exportMonth(client, month, checkpoints, async (line) => {
      const text = line + '\n';
      digest.update(text);
      await handle.write(text);
    });
    await handle.sync();
    return { events, sha256: digest.digest('hex') };
  } finally {
    await handle.close();
  }
}

async function* lines(file: string): AsyncGenerator<string> {
  const rl = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
  for await (const line of rl) yield line;
}

async function record(
  client: pg.Client,
  ok: boolean,
  headSeq: number | null,
  failure: string | null,
) {
  await client.query('SELECT audit.record_verification($1, $2, $3, $4)', [
    'archive',
    ok,
    headSeq,
    failure,
  ]);
}

runCli('audit:archive', USAGE, () => main(process.argv.slice(2), process.env));
