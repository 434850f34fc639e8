// npm run -s audit:archive -- --out DIR
// The archival job (a monthly CronJob in deploy/kubernetes): signs a checkpoint of the chain
// heads, then for each closed month, oldest first: signs every chain's last event in it (the
// heads at the month's end), exports it as JSON
// Lines with the checkpoints that bound it, verifies the export, records it, and only then
// detaches its partition (docs/audit.md, "Archival").
import { systemClock } from '@mtg/clock';
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
  type ChainHead,
  type MonthBounds,
} from '@mtg/audit';
import { parseConfig, postgresUrl } from '@mtg/config';
import type { JSONWebKeySet } from 'jose';
import type pg from 'pg';
import { z } from 'zod';
import { dataDir } from '@mtg/dev-secrets';
import { CliError, connect, messageOf, resolveDatabaseUrl } from '../audit/database.ts';
import { readJwks } from '../audit/key-files.ts';
import { loadSigningKeySource } from '../audit/signing-key-source.ts';
import { runCli } from '../lib/run-cli.ts';

const USAGE = `usage: npm run -s audit:archive -- --out DIR

Signs a checkpoint of the audit chain heads; then, for every closed month still attached
(oldest first): signs each chain's last event before the month's end, writes DIR/<partition>.jsonl (a header, the checkpoints
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
  DATABASE_URL: postgresUrl().optional(),
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
    const sign = async (before?: Date) => {
      const r = await createCheckpoint(client, {
        key: source.key,
        trustedKeys: keys,
        ...(before !== undefined ? { before } : {}),
        now: systemClock,
      });
      // A month is archived only under a checkpoint of every chain: a broken one stops it
      // (the intact chains' checkpoint is still stored, as audit:checkpoint stores it).
      const refusal = !r.ok && r.code !== 'empty' ? r.message : r.ok && r.refused[0]?.message;
      if (refusal) {
        await record(client, false, null, refusal);
        throw new ArchiveFailed(`cannot sign a checkpoint: ${refusal}`);
      }
      return r.ok ? r.checkpoint : undefined;
    };
    await ensurePartitions(client);
    const head = await sign();
    if (head) say(`signed the chain heads: ${head.heads.length} chain(s)`);
    const legacyUntil = Number(
      (
        await client.query<{ legacy_until: string }>(
          'SELECT legacy_until FROM audit.chain_heads WHERE chain_id = 0',
        )
      ).rows[0]?.legacy_until ?? 0,
    );

    let archived = 0;
    for (const month of await closedMonths(client)) {
      // The month's end: every chain's last event before it, signed at once.
      const last = await sign(new Date(month.rangeTo));
      if (!last) throw new ArchiveFailed(`${month.partition}: nothing to sign`);
      const checkpoints: { jws: string; heads?: ChainHead[] }[] = [];
      const previous = await previousBoundary(client, month);
      if (previous) checkpoints.push(previous);
      checkpoints.push({ jws: last.jws, heads: last.heads });
      const file = path.join(values.out, `${month.partition}.jsonl`);
      const partial = `${file}.partial`;
      const { events, sha256 } = await writeExport(
        client,
        month,
        checkpoints,
        partial,
        legacyUntil,
      );
      const verdict = await verifyArchive(lines(partial), keys);
      const firstSeq = Math.min(...month.chains.map((c) => c.firstSeq));
      const lastSeq = Math.max(...month.chains.map((c) => c.lastSeq));
      if (!verdict.ok) {
        await record(client, false, lastSeq, `${month.partition}: ${verdict.message}`);
        throw new ArchiveFailed(
          `${month.partition}: the export does not verify (${verdict.code}): ${verdict.message}; nothing detached, the export is left in ${partial}`,
        );
      }
      await rename(partial, file);
      await client.query(
        `INSERT INTO audit.archives (partition, first_seq, last_seq, events, checkpoint_seq, sha256, file, chains)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
        [
          month.partition,
          firstSeq,
          lastSeq,
          events,
          last.id,
          sha256,
          path.basename(file),
          JSON.stringify(month.chains),
        ],
      );
      await record(client, true, lastSeq, null);
      await client.query('SELECT audit.detach_month($1::date)', [month.rangeFrom.slice(0, 10)]);
      say(
        `archived ${month.partition}: ${month.chains.map((c) => `events ${c.firstSeq}..${c.lastSeq} (${c.events}) of chain ${c.chain}`).join(', ')} to ${file}, sha256 ${sha256}; partition detached`,
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

/** Attached, non-empty months before the head's month, oldest first, each with its chains. */
async function closedMonths(client: pg.Client): Promise<MonthBounds[]> {
  const { rows } = await client.query<{
    partition: string;
    range_from: Date;
    range_to: Date;
    chain_id: string;
    events: string;
    first_seq: string;
    first_prev_hash: string;
    last_seq: string;
    last_hash: string;
  }>(
    `SELECT b.* FROM audit.partition_bounds() b,
            (SELECT date_trunc('month', occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS month
               FROM audit.events ORDER BY occurred_at DESC, seq DESC LIMIT 1) head
      WHERE b.range_to <= head.month AND b.first_seq IS NOT NULL
      ORDER BY b.range_from, b.chain_id`,
  );
  const tenants = new Map(
    (
      await client.query<{ chain_id: string; tenant: string | null }>(
        'SELECT chain_id, tenant FROM audit.chain_heads',
      )
    ).rows.map((r) => [Number(r.chain_id), r.tenant]),
  );
  const months = new Map<string, MonthBounds>();
  for (const r of rows) {
    let m = months.get(r.partition);
    if (!m) {
      m = {
        partition: r.partition,
        rangeFrom: r.range_from.toISOString(),
        rangeTo: r.range_to.toISOString(),
        chains: [],
      };
      months.set(r.partition, m);
    }
    const chain = Number(r.chain_id);
    m.chains.push({
      chain,
      tenant: tenants.get(chain) ?? null,
      firstSeq: Number(r.first_seq),
      firstPrevHash: r.first_prev_hash,
      lastSeq: Number(r.last_seq),
      lastHash: r.last_hash,
      events: Number(r.events),
    });
  }
  return [...months.values()];
}

/**
 * A stored checkpoint that attests, for a chain continuing from an earlier month, the event
 * its first event here links to (the previous month's boundary), so the file shows both ends.
 */
async function previousBoundary(
  client: pg.Client,
  month: MonthBounds,
): Promise<{ jws: string; heads?: ChainHead[] } | undefined> {
  const continuing = month.chains.filter((c) => c.firstSeq > 1);
  if (continuing.length === 0) return undefined;
  const { rows } = await client.query<{
    jws: string;
    heads: ChainHead[] | null;
    seq: string | null;
    hash: string | null;
  }>('SELECT jws, heads, seq, hash FROM audit.checkpoint_log ORDER BY id DESC');
  for (const r of rows) {
    const heads = r.heads ?? [{ chain: 0, seq: Number(r.seq), hash: r.hash ?? '' }];
    const attests = continuing.some((c) =>
      heads.some(
        (h) => h.chain === c.chain && h.seq === c.firstSeq - 1 && h.hash === c.firstPrevHash,
      ),
    );
    if (attests) return r.heads ? { jws: r.jws, heads: r.heads } : { jws: r.jws };
  }
  return undefined;
}

async function writeExport(
  client: pg.Client,
  month: MonthBounds,
  checkpoints: Array<{ jws: string; heads?: ChainHead[] }>,
  file: string,
  legacyUntil: number,
): Promise<{ events: number; sha256: string }> {
  await rm(file, { force: true });
  const handle = await open(file, 'wx', 0o600);
  const digest = createHash('sha256');
  try {
    const { events } = await exportMonth(
      client,
      month,
      checkpoints,
      async (line) => {
        const text = line + '\n';
        digest.update(text);
        await handle.write(text);
      },
      legacyUntil,
    );
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
