import type { JSONWebKeySet } from 'jose';
import type pg from 'pg';
import {
  createChainVerifier,
  type ChainAnchor,
  type ChainFailure,
} from './chain/chain-verifier.ts';
import { GENESIS_HASH } from './chain/event-hash.ts';
import {
  hasEventsBefore,
  listChains,
  readChainSession,
  streamChain,
  type ChainRecord,
} from './chain/read-chain.ts';
import { headOf, type ChainHead, type SignedCheckpoint } from './checkpoint/sign-checkpoint.ts';
import {
  createCheckpointVerifier,
  type CheckpointProblemCode,
} from './checkpoint/verify-checkpoint.ts';

/** A checkpoint to check, from the database or from a file kept elsewhere. */
export interface CheckpointInput {
  /** Where it came from, for messages: `audit.checkpoints #12`, `cp.jsonl:3`. */
  source: string;
  jws: string;
  /** The chain heads a format 2 checkpoint signs the hash of (from the row or the file). */
  heads?: ChainHead[];
  /** The columns stored next to it in audit.checkpoints, which must agree with the payload. */
  stored?: { seq: number | null; hash: string | null; keyId: string; headsHash?: string | null };
}

export interface CheckpointProblem {
  code: CheckpointProblemCode | 'stored_columns_mismatch';
  source: string;
  message: string;
}

export interface VerifyAuditTrailOptions {
  /** Public keys of every signing key (a JWKS). Required when there is any checkpoint. */
  keys?: JSONWebKeySet;
  /** Checkpoints kept outside the database, checked along with audit.checkpoints. */
  checkpoints?: CheckpointInput[];
  /**
   * Start from a verified checkpoint instead of each chain's first event: the latest, or the
   * furthest whose head of the chain verified first (chain 0, or the tenant's) is that seq.
   * For a trail whose older months were archived, or to check only what is new.
   */
  fromCheckpoint?: number | 'latest';
  /** Verify only this tenant's chain (what an auditor of one customer asks for). */
  tenant?: string;
  batchSize?: number;
  /** Milliseconds, for the rate (performance.now by default). */
  clock?: () => number;
}

/** One chain's verdict. */
export interface ChainReport {
  chain: number;
  /** Its tenant; null for chain 0 (system events and the legacy history). */
  tenant: string | null;
  ok: boolean;
  failure?: ChainFailure;
  events: number;
  firstSeq?: number;
  lastSeq?: number;
  anchor: ChainAnchor;
  /** Verified checkpoints whose head of this chain was found on it. */
  checkpointsMatched: number;
  /** The seq of this chain's head in the latest verified checkpoint (0: none covers it). */
  coveredSeq: number;
}

/** A chain failure with the chain it is in. */
export type TrailFailure = ChainFailure & { chain: number; tenant: string | null };

export interface VerifyAuditTrailReport {
  ok: boolean;
  /** The first bad event of the first broken chain (by chain id), if any. */
  failure?: TrailFailure;
  /** The first bad event of every broken chain. */
  failures: TrailFailure[];
  chains: ChainReport[];
  checkpointProblems: CheckpointProblem[];
  events: number;
  /** With one chain verified: its first and last seq. */
  firstSeq?: number;
  lastSeq?: number;
  /** With one chain verified: where it started. Otherwise chain 0's. */
  anchor: ChainAnchor;
  checkpoints: {
    /** Distinct checkpoints seen (database and files). */
    total: number;
    /** Whose signature verified. */
    verified: number;
    /** Chain heads of verified checkpoints found on their chains. */
    matched: number;
    latest?: SignedCheckpoint;
  };
  elapsedMs: number;
  eventsPerSecond: number;
}

/** A caller mistake (exit 2 in the CLI), as opposed to a broken chain. */
export class AuditVerifyUsageError extends Error {
  readonly code: 'no_keys' | 'no_such_checkpoint' | 'no_such_tenant';
  constructor(code: 'no_keys' | 'no_such_checkpoint' | 'no_such_tenant', message: string) {
    super(message);
    this.name = 'AuditVerifyUsageError';
    this.code = code;
  }
}

type Verified = SignedCheckpoint & { source: string };

/**
 * Verifies the audit trail as of one snapshot: every checkpoint's signature, then each chain
 * on its own, in seq order (hash, link, no gap, query columns, tenant), each verified
 * checkpoint's head of that chain against the event it names, and the end of each chain
 * against the furthest checkpoint and its recorded head. A broken chain does not stop the
 * others: the report names the first bad event of each.
 * `client` must not be in a transaction; it may run as mtg_auditor (views only).
 */
export async function verifyAuditTrail(
  client: pg.ClientBase,
  options: VerifyAuditTrailOptions = {},
): Promise<VerifyAuditTrailReport> {
  const clock = options.clock ?? (() => performance.now());
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  try {
    await readChainSession(client);
    const stored = await readStoredCheckpoints(client);

    const inputs = dedupe([...stored, ...(options.checkpoints ?? [])]);
    if (inputs.length > 0 && !options.keys) {
      throw new AuditVerifyUsageError(
        'no_keys',
        `${inputs.length} checkpoint(s) to verify but no public keys: give the signing keys' JWKS (--keys FILE or AUDIT_JWKS_FILE)`,
      );
    }
    const { verified, problems } = await checkSignatures(inputs, options.keys);

    // With the chains a checkpoint attests but nothing records any more.
    let chains = await listChains(client, verified);
    if (options.tenant !== undefined) {
      const own = chains.find((c) => c.tenant === options.tenant);
      if (!own) {
        throw new AuditVerifyUsageError(
          'no_such_tenant',
          `tenant ${JSON.stringify(options.tenant)} has no audit chain`,
        );
      }
      chains = [own];
    }
    // The chain a numbered --from-checkpoint speaks of: the tenant's, else chain 0 when it
    // has events, else the first chain that has.
    const primary =
      options.tenant !== undefined || chains.some((c) => c.chain === 0 && c.headSeq > 0)
        ? (chains[0]?.chain ?? 0)
        : (chains.find((c) => c.headSeq > 0)?.chain ?? 0);
    const start = chooseStart(verified, options.fromCheckpoint, primary);
    const latest = verified.reduce<Verified | undefined>(
      (a, v) => (!a || v.signedAt > a.signedAt ? v : a),
      undefined,
    );

    const started = clock();
    const reports: ChainReport[] = [];
    for (const record of chains) {
      const report = await verifyChain(client, record, verified, start, latest, options.batchSize);
      // Chain 0 of a trail that never had a system event: nothing to report.
      if (report.ok && report.events === 0 && record.headSeq === 0 && options.tenant === undefined)
        continue;
      reports.push(report);
    }
    const elapsedMs = clock() - started;
    await client.query('COMMIT');

    const failures = reports
      .filter((r) => r.failure)
      .map((r) => ({ ...r.failure!, chain: r.chain, tenant: r.tenant }));
    const events = reports.reduce((n, r) => n + r.events, 0);
    const one = reports.length === 1 ? reports[0] : undefined;
    return {
      ok: failures.length === 0 && problems.length === 0,
      ...(failures[0] ? { failure: failures[0] } : {}),
      failures,
      chains: reports,
      checkpointProblems: problems,
      events,
      ...(one?.firstSeq !== undefined ? { firstSeq: one.firstSeq } : {}),
      ...(one?.lastSeq !== undefined ? { lastSeq: one.lastSeq } : {}),
      anchor: (one ?? reports.find((r) => r.chain === 0))?.anchor ?? {
        seq: 0,
        hash: GENESIS_HASH,
      },
      checkpoints: {
        total: inputs.length,
        verified: verified.length,
        matched: reports.reduce((n, r) => n + r.checkpointsMatched, 0),
        ...(latest ? { latest: withoutSource(latest) } : {}),
      },
      elapsedMs,
      eventsPerSecond: elapsedMs > 0 ? (events * 1000) / elapsedMs : 0,
    };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

async function verifyChain(
  client: pg.ClientBase,
  record: ChainRecord,
  verified: Verified[],
  start: Verified | undefined,
  latest: Verified | undefined,
  batchSize: number | undefined,
): Promise<ChainReport> {
  const id = record.chain;
  const startHead = start && headOf(start, id);
  const anchor: ChainAnchor = startHead
    ? { seq: startHead.seq, hash: startHead.hash, label: labelOf(start, startHead) }
    : { seq: 0, hash: GENESIS_HASH };
  const checkpoints: ChainAnchor[] = [];
  for (const v of verified) {
    const h = headOf(v, id);
    if (h) checkpoints.push({ seq: h.seq, hash: h.hash, label: labelOf(v, h) });
  }
  // Chain 0's legacy boundary as signed: a moved boundary would hash events with the other
  // formula, so the signed value wins and a differing record is reported.
  let legacyUntil = record.legacyUntil;
  let boundary: ChainFailure | undefined;
  if (id === 0) {
    const signed =
      verified.find((v) => v.legacyUntil !== undefined && v === latest) ??
      verified.find((v) => v.legacyUntil !== undefined);
    if (signed && signed.legacyUntil !== record.legacyUntil) {
      boundary = {
        code: 'checkpoint_mismatch',
        seq: Math.min(signed.legacyUntil!, record.legacyUntil) + 1,
        message: `chain 0's legacy segment ends at event ${record.legacyUntil} by audit.chains, but checkpoint ${signed.source} signed event ${signed.legacyUntil}: the boundary was moved`,
      };
      legacyUntil = signed.legacyUntil!;
    }
  }
  const olderEventsStored = await hasEventsBefore(client, anchor.seq, id);
  const chain = createChainVerifier({
    anchor,
    checkpoints,
    olderEventsStored,
    ...(record.headHash ? { chain: { id, tenant: record.tenant, legacyUntil } } : {}),
    ...(record.headHash ? { recordedHead: { seq: record.headSeq, hash: record.headHash } } : {}),
  });
  let failure: ChainFailure | undefined = boundary;
  if (!failure) {
    await streamChain(
      client,
      {
        chain: id,
        legacyUntil,
        fromSeq: Math.max(anchor.seq, 1),
        ...(batchSize ? { batchSize } : {}),
      },
      (event) => {
        failure = chain.push(event);
        return failure === undefined;
      },
    );
    failure ??= chain.finish();
  }
  const { events, firstSeq, lastSeq, checkpointsMatched } = chain.stats;
  return {
    chain: id,
    tenant: record.tenant,
    ok: !failure,
    ...(failure ? { failure } : {}),
    events,
    ...(firstSeq !== undefined ? { firstSeq } : {}),
    ...(lastSeq !== undefined ? { lastSeq } : {}),
    anchor,
    checkpointsMatched,
    coveredSeq: (latest && headOf(latest, id)?.seq) ?? 0,
  };
}

async function readStoredCheckpoints(client: pg.ClientBase): Promise<CheckpointInput[]> {
  const rows = await client.query<{
    id: string;
    seq: string | null;
    hash: string | null;
    key_id: string;
    jws: string;
    heads: string | null;
    heads_hash: string | null;
  }>({
    text: 'SELECT id, seq, hash, key_id, jws, heads, heads_hash FROM audit.checkpoint_log ORDER BY id',
    types: { getTypeParser: () => (v: string) => v },
  });
  return rows.rows.map((r) => ({
    source: `audit.checkpoints #${r.id}`,
    jws: r.jws,
    ...(r.heads !== null ? { heads: parseHeads(r.heads) } : {}),
    stored: {
      seq: r.seq === null ? null : Number(r.seq),
      hash: r.hash,
      keyId: r.key_id,
      headsHash: r.heads_hash,
    },
  }));
}

/** audit.checkpoints.heads as jsonb text: [{chain, seq, hash}]. */
export function parseHeads(text: string): ChainHead[] {
  const list = JSON.parse(text) as { chain: number; seq: number; hash: string }[];
  return list.map((h) => ({ chain: Number(h.chain), seq: Number(h.seq), hash: String(h.hash) }));
}

/** The same JWS from the database and a file is one checkpoint (the stored columns kept). */
function dedupe(inputs: CheckpointInput[]): CheckpointInput[] {
  const seen = new Map<string, CheckpointInput>();
  for (const i of inputs) {
    const had = seen.get(i.jws);
    if (!had) seen.set(i.jws, i);
    // A file that kept only the JWS: the stored row brings its heads.
    else if (!had.heads && i.heads) seen.set(i.jws, { ...had, heads: i.heads });
  }
  return [...seen.values()];
}

async function checkSignatures(inputs: CheckpointInput[], keys: JSONWebKeySet | undefined) {
  const verified: Verified[] = [];
  const problems: CheckpointProblem[] = [];
  if (!keys || inputs.length === 0) return { verified, problems };
  const verify = createCheckpointVerifier(keys);
  for (const input of inputs) {
    const result = await verify(input.jws, input.heads);
    if (!result.ok) {
      problems.push({
        code: result.code,
        source: input.source,
        message: `checkpoint ${input.source}: ${result.message}`,
      });
      continue;
    }
    const c = result.checkpoint;
    const s = input.stored;
    const legacy = c.format === 1 ? c.heads[0]! : undefined;
    if (
      s &&
      (s.keyId !== c.keyId ||
        (legacy
          ? s.seq !== legacy.seq || s.hash !== legacy.hash
          : s.seq !== null || s.hash !== null || s.headsHash !== c.headsHash))
    ) {
      const signed = legacy
        ? `seq ${legacy.seq}, hash ${legacy.hash}`
        : `heads hash ${c.headsHash}`;
      problems.push({
        code: 'stored_columns_mismatch',
        source: input.source,
        message: `checkpoint ${input.source}: its columns (seq ${s.seq}, hash ${s.hash}, heads hash ${s.headsHash ?? null}, key ${s.keyId}) differ from what was signed (${signed}, key ${c.keyId})`,
      });
      continue;
    }
    verified.push({ ...c, source: input.source });
  }
  return { verified, problems };
}

function chooseStart(
  verified: Verified[],
  from: number | 'latest' | undefined,
  primary: number,
): Verified | undefined {
  if (from === undefined) return undefined;
  const candidates =
    from === 'latest'
      ? verified.filter((v) => headOf(v, primary))
      : verified.filter((v) => headOf(v, primary)?.seq === from);
  const best = candidates.reduce<Verified | undefined>(
    (a, v) =>
      !a ||
      headOf(v, primary)!.seq > headOf(a, primary)!.seq ||
      (headOf(v, primary)!.seq === headOf(a, primary)!.seq && v.signedAt > a.signedAt)
        ? v
        : a,
    undefined,
  );
  if (!best) {
    throw new AuditVerifyUsageError(
      'no_such_checkpoint',
      from === 'latest'
        ? 'there is no verified checkpoint to start from'
        : `there is no verified checkpoint at event ${from}${primary === 0 ? '' : ` of chain ${primary}`} to start from`,
    );
  }
  return best;
}

function labelOf(c: Verified, head: ChainHead): string {
  return `${c.source} (event ${head.seq}, signed ${c.signedAt}, key ${c.keyId})`;
}

function withoutSource(c: Verified): SignedCheckpoint {
  const { source: _source, ...rest } = c;
  return rest;
}
