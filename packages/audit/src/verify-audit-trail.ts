import type { JSONWebKeySet } from 'jose';
import type pg from 'pg';
import {
  createChainVerifier,
  type ChainAnchor,
  type ChainFailure,
} from './chain/chain-verifier.ts';
import { GENESIS_HASH } from './chain/event-hash.ts';
import { hasEventsBefore, readChainSession, streamChain } from './chain/read-chain.ts';
import type { SignedCheckpoint } from './checkpoint/sign-checkpoint.ts';
import {
  createCheckpointVerifier,
  type CheckpointProblemCode,
} from './checkpoint/verify-checkpoint.ts';

/** A checkpoint to check, from the database or from a file kept elsewhere. */
export interface CheckpointInput {
  /** Where it came from, for messages: `audit.checkpoints #12`, `cp.jsonl:3`. */
  source: string;
  jws: string;
  /** The columns stored next to it in audit.checkpoints, which must agree with the payload. */
  stored?: { seq: number; hash: string; keyId: string };
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
   * Start from a verified checkpoint (its seq, or the latest) instead of the first event:
   * for a chain whose older months were archived, or to check only what is new.
   */
  fromCheckpoint?: number | 'latest';
  batchSize?: number;
  /** Milliseconds, for the rate (performance.now by default). */
  clock?: () => number;
}

export interface VerifyAuditTrailReport {
  ok: boolean;
  /** The first bad event of the chain, if any. */
  failure?: ChainFailure;
  checkpointProblems: CheckpointProblem[];
  events: number;
  firstSeq?: number;
  lastSeq?: number;
  anchor: ChainAnchor;
  checkpoints: {
    /** Distinct checkpoints seen (database and files). */
    total: number;
    /** Whose signature verified. */
    verified: number;
    /** Verified and found on the chain (the rest lie before the anchor). */
    matched: number;
    latest?: SignedCheckpoint;
  };
  elapsedMs: number;
  eventsPerSecond: number;
}

/** A caller mistake (exit 2 in the CLI), as opposed to a broken chain. */
export class AuditVerifyUsageError extends Error {
  readonly code: 'no_keys' | 'no_such_checkpoint';
  constructor(code: 'no_keys' | 'no_such_checkpoint', message: string) {
    super(message);
    this.name = 'AuditVerifyUsageError';
    this.code = code;
  }
}

/**
 * Verifies the audit trail as of one snapshot: every checkpoint's signature, then every
 * event in seq order (hash, link, no gap, query columns), each verified checkpoint against
 * the event it names, and the end of the chain against the furthest checkpoint.
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

    const anchor = chooseAnchor(verified, options.fromCheckpoint);
    const chain = createChainVerifier({
      anchor,
      checkpoints: verified.map((v) => ({ seq: v.seq, hash: v.hash, label: labelOf(v) })),
      olderEventsStored: await hasEventsBefore(client, anchor.seq),
    });

    const started = clock();
    let failure: ChainFailure | undefined;
    await streamChain(
      client,
      {
        fromSeq: Math.max(anchor.seq, 1),
        ...(options.batchSize ? { batchSize: options.batchSize } : {}),
      },
      (event) => {
        failure = chain.push(event);
        return failure === undefined;
      },
    );
    failure ??= chain.finish();
    const elapsedMs = clock() - started;
    await client.query('COMMIT');

    const latest = verified.reduce<(SignedCheckpoint & { source: string }) | undefined>(
      (a, v) => (!a || v.seq > a.seq || (v.seq === a.seq && v.signedAt > a.signedAt) ? v : a),
      undefined,
    );
    const { events, firstSeq, lastSeq, checkpointsMatched } = chain.stats;
    return {
      ok: !failure && problems.length === 0,
      ...(failure ? { failure } : {}),
      checkpointProblems: problems,
      events,
      ...(firstSeq !== undefined ? { firstSeq } : {}),
      ...(lastSeq !== undefined ? { lastSeq } : {}),
      anchor,
      checkpoints: {
        total: inputs.length,
        verified: verified.length,
        matched: checkpointsMatched,
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

async function readStoredCheckpoints(client: pg.ClientBase): Promise<CheckpointInput[]> {
  const rows = await client.query<{
    id: string;
    seq: string;
    hash: string;
    key_id: string;
    jws: string;
  }>({
    text: 'SELECT id, seq, hash, key_id, jws FROM audit.checkpoint_log ORDER BY seq, id',
    types: { getTypeParser: () => (v: string) => v },
  });
  return rows.rows.map((r) => ({
    source: `audit.checkpoints #${r.id}`,
    jws: r.jws,
    stored: { seq: Number(r.seq), hash: r.hash, keyId: r.key_id },
  }));
}

/** The same JWS from the database and a file is one checkpoint (the stored columns kept). */
function dedupe(inputs: CheckpointInput[]): CheckpointInput[] {
  const seen = new Map<string, CheckpointInput>();
  for (const i of inputs) if (!seen.has(i.jws)) seen.set(i.jws, i);
  return [...seen.values()];
}

async function checkSignatures(inputs: CheckpointInput[], keys: JSONWebKeySet | undefined) {
  const verified: (SignedCheckpoint & { source: string })[] = [];
  const problems: CheckpointProblem[] = [];
  if (!keys || inputs.length === 0) return { verified, problems };
  const verify = createCheckpointVerifier(keys);
  for (const input of inputs) {
    const result = await verify(input.jws);
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
    if (s && (s.seq !== c.seq || s.hash !== c.hash || s.keyId !== c.keyId)) {
      problems.push({
        code: 'stored_columns_mismatch',
        source: input.source,
        message: `checkpoint ${input.source}: its columns (seq ${s.seq}, hash ${s.hash}, key ${s.keyId}) differ from what was signed (seq ${c.seq}, hash ${c.hash}, key ${c.keyId})`,
      });
      continue;
    }
    verified.push({ ...c, source: input.source });
  }
  return { verified, problems };
}

function chooseAnchor(
  verified: (SignedCheckpoint & { source: string })[],
  from: number | 'latest' | undefined,
): ChainAnchor {
  if (from === undefined) return { seq: 0, hash: GENESIS_HASH };
  const candidates = from === 'latest' ? verified : verified.filter((v) => v.seq === from);
  const best = candidates.reduce<(typeof verified)[number] | undefined>(
    (a, v) => (!a || v.seq > a.seq ? v : a),
    undefined,
  );
  if (!best) {
    throw new AuditVerifyUsageError(
      'no_such_checkpoint',
      from === 'latest'
        ? 'there is no verified checkpoint to start from'
        : `there is no verified checkpoint at event ${from} to start from`,
    );
  }
  return { seq: best.seq, hash: best.hash, label: labelOf(best) };
}

function labelOf(c: SignedCheckpoint & { source: string }): string {
  return `${c.source} (event ${c.seq}, signed ${c.signedAt}, key ${c.keyId})`;
}

function withoutSource(c: SignedCheckpoint & { source: string }): SignedCheckpoint {
  const { source: _source, ...rest } = c;
  return rest;
}
