import type { JSONWebKeySet } from 'jose';
import type pg from 'pg';
import { createChainVerifier, type ChainEvent, type ChainFailure } from './chain/chain-verifier.ts';
import { GENESIS_HASH } from './chain/event-hash.ts';
import {
  hasEventsBefore,
  listChains,
  readChainSession,
  streamChain,
  type ChainRecord,
} from './chain/read-chain.ts';
import {
  headOf,
  signCheckpoint,
  type ChainHead,
  type SignedCheckpoint,
} from './checkpoint/sign-checkpoint.ts';
import type { SigningKey } from './checkpoint/signing-key.ts';
import { createCheckpointVerifier } from './checkpoint/verify-checkpoint.ts';
import { parseHeads } from './verify-audit-trail.ts';

export interface CreateCheckpointOptions {
  key: SigningKey;
  /**
   * Public keys whose earlier checkpoints are trusted as the starting point (the signing
   * key's own is always added). Checkpoints of other keys are skipped.
   */
  trustedKeys?: JSONWebKeySet;
  /**
   * Sign each chain's last event before this instant instead of its head (an archive
   * boundary: the end of a month).
   */
  before?: Date;
  now: () => Date;
  /**
   * Sign only what this many streaming standbys have flushed (docs/audit.md, "Checkpoints and
   * replication"): after reading the heads, wait up to `waitMs` until that many have the WAL
   * up to where the heads were read; otherwise sign nothing (`standbys_behind`). Unset or
   * `min: 0`: sign at once (a single server; or synchronous replication, where every commit
   * is already on the synchronous standby when it returns).
   */
  standbys?: { min: number; waitMs: number; everyMs?: number };
}

/** A chain left out of a checkpoint because it does not verify. */
export interface RefusedChain {
  chain: number;
  /** The chain's tenant; null for chain 0 (system events). */
  tenant: string | null;
  failure: ChainFailure;
  /** `refusing to sign: chain 3 (tenant "acme"): event 14 was modified` */
  message: string;
}

export type CreateCheckpointResult =
  | {
      ok: true;
      /** Covers every chain that verified; those that did not are in `refused`. */
      checkpoint: SignedCheckpoint & { id: number };
      /**
       * Chains that did not verify and so were left out of the checkpoint (empty when every
       * chain was signed). Not empty is an alarm: a chain was tampered with or cut.
       */
      refused: RefusedChain[];
      /** Events verified before signing (those after the previous checkpoint, every chain). */
      verifiedEvents: number;
      /** The newest checkpoint verification started from, if any. */
      since?: SignedCheckpoint;
      /** Earlier checkpoints ignored because their key is not trusted. */
      skipped: number;
    }
  | { ok: false; code: 'empty'; message: string }
  | {
      ok: false;
      /** Every chain with events was refused: nothing signed. */
      code: 'chain_broken';
      message: string;
      /** The first refused chain's failure (as `refused[0]`). */
      failure: ChainFailure;
      chain: number;
      refused: RefusedChain[];
    }
  | { ok: false; code: 'bad_checkpoint'; message: string }
  | {
      ok: false;
      /** Fewer standbys than required have the heads yet: nothing signed (try again later). */
      code: 'standbys_behind';
      message: string;
      /** The WAL position the heads were read at. */
      lsn: string;
      confirmed: number;
    };

type Trusted = SignedCheckpoint & { id: string };

/**
 * Signs a checkpoint of every chain head (or of each chain's last event before `before`) and
 * stores it in audit.checkpoints. It signs only what it has verified: for each chain, the
 * events from the latest trusted checkpoint's head of that chain (or its start) to the head
 * it signs, read in one snapshot; a broken chain is refused, and so is a head below one a
 * checkpoint already signed (a cut tail). A refused chain is left out and named in
 * `refused`; the other chains are still signed, so one tenant's broken chain does not leave
 * every tenant's evidence without a checkpoint. A stored checkpoint with a bad signature
 * refuses the whole run (no chain's starting point can be trusted). Periodic runs so verify
 * only the events since the previous run.
 */
export async function createCheckpoint(
  client: pg.ClientBase,
  options: CreateCheckpointOptions,
): Promise<CreateCheckpointResult> {
  const keys: JSONWebKeySet = {
    keys: [
      ...(options.trustedKeys?.keys ?? []).filter((k) => k.kid !== options.key.keyId),
      options.key.publicJwk,
    ],
  };
  const verify = createCheckpointVerifier(keys);

  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  const heads: ChainHead[] = [];
  let legacyUntil: number;
  let since: Trusted | undefined;
  let verifiedEvents = 0;
  let skipped = 0;
  const refused: RefusedChain[] = [];
  try {
    await readChainSession(client);
    const stored = await client.query<{ id: string; jws: string; heads: string | null }>({
      text: 'SELECT id, jws, heads FROM audit.checkpoint_log ORDER BY id DESC',
      types: { getTypeParser: () => (v: string) => v },
    });
    const trusted: Trusted[] = [];
    for (const row of stored.rows) {
      const result = await verify(row.jws, row.heads === null ? undefined : parseHeads(row.heads));
      if (result.ok) trusted.push({ ...result.checkpoint, id: row.id });
      else if (result.code === 'unknown_key') skipped++;
      else {
        await client.query('ROLLBACK');
        return {
          ok: false,
          code: 'bad_checkpoint',
          message: `audit.checkpoints #${row.id}: ${result.message}`,
        };
      }
    }

    const chains = await listChains(client, trusted);
    legacyUntil = chains.find((c) => c.chain === 0)?.legacyUntil ?? 0;
    const signedBoundary = trusted.find((t) => t.legacyUntil !== undefined)?.legacyUntil;
    const refuse = (record: ChainRecord, failure: ChainFailure) =>
      refused.push({
        chain: record.chain,
        tenant: record.tenant,
        failure,
        message: `refusing to sign: chain ${describeChain(record)}: ${failure.message}`,
      });
    let boundaryMoved: ChainFailure | undefined;
    if (signedBoundary !== undefined && signedBoundary !== legacyUntil) {
      boundaryMoved = {
        code: 'checkpoint_mismatch',
        seq: Math.min(signedBoundary, legacyUntil) + 1,
        message: `chain 0's legacy segment ends at event ${legacyUntil} by audit.chains, but a checkpoint signed event ${signedBoundary}: the boundary was moved`,
      };
      // Chain 0 is refused; the others are signed with the boundary as it was signed, so
      // no checkpoint ever attests the moved one.
      legacyUntil = signedBoundary;
    }
    const targets = options.before ? await headsBefore(client, options.before) : undefined;

    for (const record of chains) {
      if (record.chain === 0 && boundaryMoved) {
        refuse(record, boundaryMoved);
        continue;
      }
      const target = targets ? targets.get(record.chain) : headOfRecord(record);
      const checked = await checkChain(client, record, target, trusted);
      if ('failure' in checked) {
        refuse(record, checked.failure);
        continue;
      }
      verifiedEvents += checked.verifiedEvents;
      if (checked.since && (!since || checked.since.signedAt > since.signedAt))
        since = checked.since;
      if (target) heads.push(target);
    }
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
  if (heads.length === 0 && refused[0]) {
    return {
      ok: false,
      code: 'chain_broken',
      message: refused.map((r) => r.message).join('\n'),
      failure: refused[0].failure,
      chain: refused[0].chain,
      refused,
    };
  }
  if (heads.length === 0) {
    return { ok: false, code: 'empty', message: 'the audit trail is empty: nothing to sign' };
  }

  if (options.standbys && options.standbys.min > 0) {
    const behind = await awaitStandbys(client, options.standbys);
    if (behind) return behind;
  }

  const signed = await signCheckpoint(heads, legacyUntil, options.key, options.now());
  const id = Number(
    (
      await client.query<{ id: string }>(
        'SELECT audit.record_checkpoint_heads($1, $2, $3, $4, $5) AS id',
        [JSON.stringify(signed.heads), signed.headsHash, signed.signedAt, signed.keyId, signed.jws],
      )
    ).rows[0]!.id,
  );
  return {
    ok: true,
    checkpoint: { ...signed, id },
    refused,
    verifiedEvents,
    ...(since ? { since: withoutId(since) } : {}),
    skipped,
  };
}

function headOfRecord(r: ChainRecord): ChainHead | undefined {
  return r.headSeq > 0 && r.headHash
    ? { chain: r.chain, seq: r.headSeq, hash: r.headHash }
    : undefined;
}

function describeChain(r: ChainRecord): string {
  return r.chain === 0
    ? '0 (system)'
    : `${r.chain}${r.tenant !== null ? ` (tenant ${JSON.stringify(r.tenant)})` : ''}`;
}

/**
 * Each chain's last event before `before`: its recorded head when that is older (also when
 * its events were archived since), else its last stored event before then.
 */
async function headsBefore(client: pg.ClientBase, before: Date): Promise<Map<number, ChainHead>> {
  const rows = await client.query<{ chain_id: string; seq: string; hash: string }>(
    `SELECT chain_id, seq, hash FROM audit.chain_heads WHERE seq > 0 AND occurred_at < $1
     UNION ALL
     SELECT * FROM (SELECT DISTINCT ON (e.chain_id) e.chain_id, e.seq, e.hash
                      FROM audit.event_log e
                      JOIN audit.chain_heads h ON h.chain_id = e.chain_id AND h.occurred_at >= $1
                     WHERE e.occurred_at < $1 ORDER BY e.chain_id, e.seq DESC) last`,
    [before],
  );
  return new Map(
    rows.rows.map((r) => [
      Number(r.chain_id),
      { chain: Number(r.chain_id), seq: Number(r.seq), hash: r.hash },
    ]),
  );
}

/**
 * One chain, before its head is signed: it still reaches the furthest trusted checkpoint of
 * it, and it verifies from the latest trusted checkpoint at or below the target to the
 * target, which it must end at.
 */
async function checkChain(
  client: pg.ClientBase,
  record: ChainRecord,
  target: ChainHead | undefined,
  trusted: Trusted[],
): Promise<{ failure: ChainFailure } | { verifiedEvents: number; since?: Trusted }> {
  const id = record.chain;
  const targetSeq = target?.seq ?? 0;
  // The last event stored (not the recorded head: a cut tail leaves that behind).
  const storedHead = Number(
    (
      await client.query<{ seq: string | null }>(
        'SELECT max(seq)::text AS seq FROM audit.event_log WHERE chain_id = $1',
        [id],
      )
    ).rows[0]?.seq ?? 0,
  );
  // Never sign below what was signed: the chain must still reach the furthest checkpoint.
  let furthest: { c: Trusted; h: ChainHead } | undefined;
  let start: { c: Trusted; h: ChainHead } | undefined;
  for (const c of trusted) {
    const h = headOf(c, id);
    if (!h) continue;
    if (!furthest || h.seq > furthest.h.seq) furthest = { c, h };
    if (h.seq <= targetSeq && (!start || h.seq > start.h.seq)) start = { c, h };
  }
  // Nothing stored, and the recorded head is the furthest signed one: every event of the chain
  // was archived (a tenant idle since a detached month), not cut.
  const archivedWhole =
    storedHead === 0 &&
    furthest !== undefined &&
    record.headSeq === furthest.h.seq &&
    record.headHash === furthest.h.hash;
  if (furthest && furthest.h.seq > storedHead && !archivedWhole) {
    const which = `checkpoint audit.checkpoints #${furthest.c.id} (event ${furthest.h.seq}, signed ${furthest.c.signedAt})`;
    return {
      failure: {
        code: 'truncated',
        seq: storedHead + 1,
        message: `the chain ends at event ${storedHead}, but ${which} attests event ${furthest.h.seq}: events ${storedHead + 1}..${furthest.h.seq} are gone`,
      },
    };
  }
  if (furthest && furthest.h.seq > targetSeq) {
    const which = `checkpoint audit.checkpoints #${furthest.c.id} (event ${furthest.h.seq}, signed ${furthest.c.signedAt})`;
    const row = await client.query<{ hash: string }>(
      'SELECT hash FROM audit.event_log WHERE chain_id = $1 AND seq = $2',
      [id, furthest.h.seq],
    );
    const hash = row.rows[0]?.hash;
    if (hash !== furthest.h.hash) {
      return {
        failure:
          hash === undefined
            ? {
                code: 'missing',
                seq: furthest.h.seq,
                message: `event ${furthest.h.seq}, which ${which} attests, is missing`,
              }
            : {
                code: 'checkpoint_mismatch',
                seq: furthest.h.seq,
                message: `event ${furthest.h.seq} is not the event ${which} attests (hash ${hash}, signed ${furthest.h.hash})`,
              },
      };
    }
  }
  if (!target) return { verifiedEvents: 0 };

  const anchor = start ? { seq: start.h.seq, hash: start.h.hash } : { seq: 0, hash: GENESIS_HASH };
  const chain = createChainVerifier({
    anchor,
    olderEventsStored: await hasEventsBefore(client, anchor.seq, id),
    ...(record.headHash
      ? { chain: { id, tenant: record.tenant, legacyUntil: record.legacyUntil } }
      : {}),
    // Signing the recorded head: a chain whose events from the anchor on were all archived
    // (idle since) still has that head.
    ...(record.headSeq === targetSeq && record.headHash === target.hash
      ? { recordedHead: { seq: record.headSeq, hash: record.headHash } }
      : {}),
  });
  let failure: ChainFailure | undefined;
  let last: ChainEvent | undefined;
  await streamChain(
    client,
    {
      chain: id,
      legacyUntil: record.legacyUntil,
      fromSeq: Math.max(anchor.seq, 1),
      toSeq: targetSeq,
    },
    (event) => {
      failure = chain.push(event);
      if (failure) return false;
      last = event;
      return true;
    },
  );
  failure ??= chain.finish();
  const unmoved =
    chain.stats.events === 0 && anchor.seq === targetSeq && anchor.hash === target.hash;
  if (!failure && !unmoved && (last?.seq !== targetSeq || last.hash !== target.hash)) {
    failure = {
      code: 'missing',
      seq: (last?.seq ?? anchor.seq) + 1,
      message: `event ${targetSeq} with hash ${target.hash} is not stored`,
    };
  }
  if (failure) return { failure };
  return { verifiedEvents: chain.stats.events, ...(start ? { since: start.c } : {}) };
}

function withoutId(c: Trusted): SignedCheckpoint {
  const { id: _id, ...rest } = c;
  return rest;
}

/**
 * Waits until `min` streaming standbys have flushed the WAL up to now: the heads were read in
 * a transaction that has ended, so every event they name committed before this position.
 */
async function awaitStandbys(
  client: pg.ClientBase,
  o: { min: number; waitMs: number; everyMs?: number },
): Promise<Extract<CreateCheckpointResult, { code: 'standbys_behind' }> | undefined> {
  const lsn = (await client.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn'))
    .rows[0]!.lsn;
  const until = performance.now() + o.waitMs;
  for (;;) {
    const confirmed = (
      await client.query<{ n: number }>('SELECT audit.standbys_flushed($1::pg_lsn) AS n', [lsn])
    ).rows[0]!.n;
    if (confirmed >= o.min) return undefined;
    if (performance.now() >= until)
      return {
        ok: false,
        code: 'standbys_behind',
        lsn,
        confirmed,
        message: `refusing to sign: ${confirmed} of the ${o.min} standby(s) required have the heads (WAL ${lsn}) after ${o.waitMs} ms; a failover now could lose what would be signed`,
      };
    await new Promise((r) => setTimeout(r, o.everyMs ?? 100));
  }
}
