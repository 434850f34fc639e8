// npm run -s audit:checkpoint -- [--out FILE] [--every SECONDS] [--before TIME]
// npm run -s audit:checkpoint -- --new-key FILE [--jwks JWKS_FILE]
// Signs every audit chain head with the Ed25519 checkpoint key, stores it in
// audit.checkpoints and prints it (docs/audit.md).
import { systemClock } from '@mtg/clock';
import { parseArgs } from 'node:util';
import {
  createCheckpoint,
  ensurePartitions,
  generateSigningJwk,
  publicJwkOf,
  type CreateCheckpointResult,
  type RefusedChain,
} from '@mtg/audit';
import { parseConfig, postgresUrl } from '@mtg/config';
import type { JSONWebKeySet } from 'jose';
import { z } from 'zod';
import { dataDir } from '@mtg/dev-secrets';
import { appendCheckpointLine, checkpointLine } from '../audit/checkpoint-file.ts';
import { CliError, connect, messageOf, resolveDatabaseUrl } from '../audit/database.ts';
import { addToJwks, readJwks, writePrivateKey } from '../audit/key-files.ts';
import { loadSigningKeySource } from '../audit/signing-key-source.ts';
import { runCli } from '../lib/run-cli.ts';

const USAGE = `usage: npm run -s audit:checkpoint -- [--out FILE] [--every SECONDS] [--before TIME]
       npm run -s audit:checkpoint -- --new-key FILE [--jwks JWKS_FILE]

Verifies each chain's events since the previous checkpoint, signs every chain head (the
sorted list of chain, seq and hash) with the checkpoint key, stores the checkpoint in
audit.checkpoints and prints it as one JSON line (with the heads); --out FILE also appends
that line to FILE (keep it outside the database). --every SECONDS keeps running and signs
each time a head has moved. --before TIME (ISO 8601) signs each chain's last event before
TIME instead of its head (the end of a month to archive). Also creates the coming months'
partitions.

--new-key FILE writes a new private key (mode 0600) for rotation and prints its public JWK;
--jwks adds that public key to a JWKS file.

Key: AUDIT_SIGNING_KEY_FILE (a private Ed25519 JWK, mode 0600) or AUDIT_SIGNING_KEY; unset
outside production, a dev key generated in <DATA_DIR>/audit/ (its public key in
<DATA_DIR>/audit/jwks.json). AUDIT_JWKS_FILE: public keys whose earlier checkpoints are
trusted as the starting point. Database: DATABASE_URL, else the running embedded
PostgreSQL; role DATABASE_ROLE (default mtg_audit_signer). AUDIT_CHECKPOINT_STANDBYS=N
(default 0): sign only once N streaming standbys have flushed the heads, waiting up to
AUDIT_CHECKPOINT_STANDBY_WAIT_MS (default 10000); else nothing is signed (exit 1) — set it
with asynchronous replication, so a failover cannot lose a signed head.

Exit status: 0 every chain signed (or nothing to sign); 1 a chain is broken: it is named on
stderr and left out, every intact chain is still signed (nothing signed when none is intact,
or when a stored checkpoint's signature is bad); 2 usage or configuration; 3 could not run.
With --every a broken chain does not stop the loop; the exit status after SIGTERM is 1 when
the last run refused a chain.`;

const schema = z.object({
  DATABASE_URL: postgresUrl().optional(),
  DATABASE_ROLE: z.string().regex(/^\w+$/, 'must be a role name').default('mtg_audit_signer'),
  AUDIT_SIGNING_KEY: z.string().min(1).optional(),
  AUDIT_SIGNING_KEY_FILE: z.string().min(1).optional(),
  AUDIT_JWKS_FILE: z.string().min(1).optional(),
  /** Sign only what this many streaming standbys have flushed (docs/audit.md). */
  AUDIT_CHECKPOINT_STANDBYS: z.coerce.number().int().min(0).max(16).default(0),
  AUDIT_CHECKPOINT_STANDBY_WAIT_MS: z.coerce.number().int().min(0).max(600_000).default(10_000),
  NODE_ENV: z.string().optional(),
});

async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      out: { type: 'string' },
      every: { type: 'string' },
      before: { type: 'string' },
      'new-key': { type: 'string' },
      jwks: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  if (values['new-key']) return newKey(values['new-key'], values.jwks);
  if (values.jwks) throw new CliError('--jwks goes with --new-key');

  const config = parseConfig(schema, env);
  const every = values.every === undefined ? undefined : Number(values.every);
  if (every !== undefined && !(every > 0 && Number.isFinite(every))) {
    throw new CliError('--every takes a number of seconds > 0');
  }
  const before = values.before === undefined ? undefined : new Date(values.before);
  if (
    before !== undefined &&
    (!/^\d{4}-\d{2}-\d{2}/.test(values.before!) || Number.isNaN(before.getTime()))
  )
    throw new CliError('--before takes an ISO 8601 time (2026-09-01 or 2026-09-01T00:00:00Z)');
  if (before !== undefined && every !== undefined)
    throw new CliError('--before and --every do not go together');

  const source = await loadSigningKeySource({ ...config, dataDir: dataDir(env) });
  if (source.generated)
    process.stderr.write(`audit:checkpoint: generated the dev signing key ${source.from}\n`);
  const trustedFile = config.AUDIT_JWKS_FILE ?? source.devJwksFile;
  const trustedKeys: JSONWebKeySet | undefined = trustedFile
    ? await readJwks(trustedFile)
    : undefined;

  const { url, where } = await resolveDatabaseUrl(config.DATABASE_URL, dataDir(env));
  const client = await connect(url, where, config.DATABASE_ROLE, 'audit-checkpoint');
  try {
    const once = async (): Promise<CreateCheckpointResult> => {
      await ensurePartitions(client);
      return createCheckpoint(client, {
        key: source.key,
        ...(trustedKeys ? { trustedKeys } : {}),
        ...(before !== undefined ? { before } : {}),
        standbys: {
          min: config.AUDIT_CHECKPOINT_STANDBYS,
          waitMs: config.AUDIT_CHECKPOINT_STANDBY_WAIT_MS,
        },
        now: systemClock,
      });
    };
    const report = async (result: CreateCheckpointResult): Promise<number> => {
      if (!result.ok) {
        if (result.code === 'chain_broken') refusedLines(result.refused);
        else process.stderr.write(`audit:checkpoint: ${result.message}\n`);
        return result.code === 'empty' ? 0 : 1;
      }
      const line = checkpointLine(result.checkpoint);
      process.stdout.write(line + '\n');
      if (values.out) await appendCheckpointLine(values.out, line);
      if (result.skipped > 0) {
        process.stderr.write(
          `audit:checkpoint: ${result.skipped} earlier checkpoint(s) signed by keys not in AUDIT_JWKS_FILE were not used as the starting point\n`,
        );
      }
      if (result.refused.length === 0) return 0;
      // The intact chains are signed (above); the broken ones are an alarm, not a reason to
      // leave every other tenant without a checkpoint.
      refusedLines(result.refused);
      process.stderr.write(
        `audit:checkpoint: error: signed ${result.checkpoint.heads.length} intact chain(s); refused ${result.refused.length}: ${result.refused.map(chainName).join(', ')}\n`,
      );
      return 1;
    };

    if (every === undefined) return await report(await run(once, where));
    // Every chain's seq: any head that moved changes it.
    const heads = async () =>
      String(
        (
          await client.query<{ h: string }>(
            `SELECT coalesce(string_agg(chain_id || ':' || seq, ',' ORDER BY chain_id), '') AS h FROM audit.chain_heads`,
          )
        ).rows[0]?.h ?? '',
      );
    return await loop(every, once, heads, report, where);
  } finally {
    await client.end().catch(() => {});
  }
}

function refusedLines(refused: readonly RefusedChain[]): void {
  for (const r of refused) process.stderr.write(`audit:checkpoint: ${r.message}\n`);
}

const chainName = (r: RefusedChain) =>
  r.tenant === null
    ? `chain ${r.chain} (system)`
    : `chain ${r.chain} (tenant ${JSON.stringify(r.tenant)})`;

async function run<T>(fn: () => Promise<T>, where: string): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw new CliError(`checkpoint failed against ${where}: ${messageOf(error)}`, 3);
  }
}

/**
 * --every: sign whenever a head has moved, until SIGINT/SIGTERM. A broken chain is reported
 * on every run and does not stop the loop (the intact chains go on being signed); a bad
 * stored checkpoint does (exit 1), since no run can sign anything until it is dealt with.
 */
async function loop(
  seconds: number,
  once: () => Promise<CreateCheckpointResult>,
  heads: () => Promise<string>,
  report: (r: CreateCheckpointResult) => Promise<number>,
  where: string,
): Promise<number> {
  let stopping = false;
  let wake: (() => void) | undefined;
  const stop = () => {
    stopping = true;
    wake?.();
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  let last: string | undefined;
  let status = 0;
  while (!stopping) {
    const now = await run(heads, where);
    if (now !== last) {
      const result = await run(once, where);
      status = await report(result);
      if (!result.ok && result.code === 'bad_checkpoint') return status;
      // Not signed for want of standbys: the next round tries the same heads again.
      if (result.ok || result.code !== 'standbys_behind') last = now;
    }
    if (stopping) break;
    await new Promise<void>((resolve) => {
      wake = resolve;
      setTimeout(resolve, seconds * 1000).unref();
    });
  }
  return status;
}

async function newKey(file: string, jwksFile: string | undefined): Promise<number> {
  const jwk = await generateSigningJwk();
  await writePrivateKey(file, jwk);
  const pub = publicJwkOf(jwk);
  if (jwksFile) await addToJwks(jwksFile, pub);
  process.stdout.write(JSON.stringify(pub) + '\n');
  process.stderr.write(
    `audit:checkpoint: new signing key ${jwk.kid} in ${file}${jwksFile ? `, public key added to ${jwksFile}` : ''}\n`,
  );
  return 0;
}

runCli('audit:checkpoint', USAGE, () => main(process.argv.slice(2), process.env));
