import type { JSONWebKeySet } from 'jose';
import type pg from 'pg';
import { createChainVerifier, type ChainEvent, type ChainFailure } from './chain/chain-verifier.ts';
import { GENESIS_HASH } from './chain/event-hash.ts';
import { hasEventsBefore, readChainSession, streamChain } from './chain/read-chain.ts';
import { signCheckpoint, type SignedCheckpoint } from './checkpoint/sign-checkpoint.ts';
import type { SigningKey } from './checkpoint/signing-key.ts';
import { createCheckpointVerifier } from './checkpoint/verify-checkpoint.ts';

export interface CreateCheckpointOptions {
  key: SigningKey;
  /**
   * Public keys whose earlier checkpoints are trusted as the starting point (the signing
   * key's own is always added). Checkpoints of other keys are skipped.
   */
  trustedKeys?: JSONWebKeySet;
  /** Sign this event instead of the head (an archive boundary). */
  seq?: number;
  now: () => Date;
}

export type CreateCheckpointResult =
  | {
      ok: true;
      checkpoint: SignedCheckpoint & { id: number };
      /** Events verified before signing (those after the previous checkpoint). */
      verifiedEvents: number;
      /** The checkpoint verification started from, if any. */
      since?: SignedCheckpoint;
      /** Earlier checkpoints ignored because their key is not trusted. */
      skipped: number;
    }
  | { ok: false; code: 'empty' | 'no_such_event'; message: string }
  | { ok: false; code: 'chain_broken'; message: string; failure: ChainFailure }
  | { ok: false; code: 'bad_checkpoint'; message: string };

/**
 * Signs a checkpoint of the chain head (or of event `seq`) and stores it in
 * audit.checkpoints. It signs only what it has verified: the events from the latest
 * trusted checkpoint (or the start) to the one it signs, read in one snapshot; a broken
 * chain, or a stored checkpoint with a bad signature, is refused, and so is a head below a
 * checkpoint already signed (a cut tail). Periodic runs so verify only the events since the
 * previous run.
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
  let target: ChainEvent | undefined;
  let since: SignedCheckpoint | undefined;
  let verifiedEvents = 0;
  let skipped = 0;
  try {
    await readChainSession(client);
    const head = Number((await client.query('SELECT seq FROM audit.chain_head')).rows[0]?.seq ?? 0);
    const targetSeq = options.seq ?? head;
    if (head > 0 && (!Number.isSafeInteger(targetSeq) || targetSeq < 1 || targetSeq > head)) {
      await client.query('ROLLBACK');
      return {
        ok: false,
        code: 'no_such_event',
        message: `there is no event ${targetSeq} (the head is event ${head})`,
      };
    }

    // Never sign below what was signed: the chain must still reach the furthest checkpoint.
    const above = await client.query<{ id: string; jws: string }>(
      'SELECT id, jws FROM audit.checkpoint_log WHERE seq > $1 ORDER BY seq DESC, id DESC',
      [head === 0 ? 0 : targetSeq],
    );
    let furthest: (SignedCheckpoint & { id: string }) | undefined;
    for (const row of above.rows) {
      const result = await verify(row.jws);
      if (result.ok) {
        furthest = { ...result.checkpoint, id: row.id };
        break;
      }
      if (result.code !== 'unknown_key') {
        await client.query('ROLLBACK');
        return {
          ok: false,
          code: 'bad_checkpoint',
          message: `audit.checkpoints #${row.id}: ${result.message}`,
        };
      }
      skipped++;
    }
    const lost = furthest && (await furthestLost(client, furthest, head));
    if (lost) {
      await client.query('ROLLBACK');
      return {
        ok: false,
        code: 'chain_broken',
        message: `refusing to sign: ${lost.message}`,
        failure: lost,
      };
    }

    if (head === 0) {
      await client.query('ROLLBACK');
      return { ok: false, code: 'empty', message: 'the audit trail is empty: nothing to sign' };
    }

    const stored = await client.query<{ id: string; jws: string }>(
      'SELECT id, jws FROM audit.checkpoint_log WHERE seq <= $1 ORDER BY seq DESC, id DESC',
      [targetSeq],
    );
    for (const row of stored.rows) {
      const result = await verify(row.jws);
      if (result.ok) {
        since = result.checkpoint;
        break;
      }
      if (result.code !== 'unknown_key') {
        await client.query('ROLLBACK');
        return {
          ok: false,
          code: 'bad_checkpoint',
          message: `audit.checkpoints #${row.id}: ${result.message}`,
        };
      }
      skipped++;
    }

    const anchor = since ? { seq: since.seq, hash: since.hash } : { seq: 0, hash: GENESIS_HASH };
    const chain = createChainVerifier({
      anchor,
      olderEventsStored: await hasEventsBefore(client, anchor.seq),
    });
    let failure: ChainFailure | undefined;
    await streamChain(client, { fromSeq: Math.max(anchor.seq, 1), toSeq: targetSeq }, (event) => {
      failure = chain.push(event);
      if (failure) return false;
      target = event;
      return true;
    });
    failure ??= chain.finish();
    if (!failure && target?.seq !== targetSeq) {
      failure = {
        code: 'missing',
        seq: (target?.seq ?? anchor.seq) + 1,
        message: `event ${targetSeq} is not stored`,
      };
    }
    await client.query('COMMIT');
    if (failure) {
      return {
        ok: false,
        code: 'chain_broken',
        message: `refusing to sign: ${failure.message}`,
        failure,
      };
    }
    verifiedEvents = chain.stats.events;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }

  const signed = await signCheckpoint(target!, options.key, options.now());
  const id = Number(
    (
      await client.query<{ id: string }>(
        'SELECT audit.record_checkpoint($1, $2, $3, $4, $5) AS id',
        [signed.seq, signed.hash, signed.signedAt, signed.keyId, signed.jws],
      )
    ).rows[0]!.id,
  );
  return {
    ok: true,
    checkpoint: { ...signed, id },
    verifiedEvents,
    ...(since ? { since } : {}),
    skipped,
  };
}

/**
 * Whether a checkpoint above the event to sign is no longer on the chain: the head fell below
 * it (the tail was cut) or its event now has another hash (rewritten).
 */
async function furthestLost(
  client: pg.ClientBase,
  c: SignedCheckpoint & { id: string },
  head: number,
): Promise<ChainFailure | undefined> {
  const which = `checkpoint audit.checkpoints #${c.id} (event ${c.seq}, signed ${c.signedAt})`;
  if (c.seq > head) {
    return {
      code: 'truncated',
      seq: head + 1,
      message: `the chain ends at event ${head}, but ${which} attests event ${c.seq}: events ${head + 1}..${c.seq} are gone`,
    };
  }
  const row = await client.query<{ hash: string }>(
    'SELECT hash FROM audit.event_log WHERE seq = $1',
    [c.seq],
  );
  const hash = row.rows[0]?.hash;
  if (hash === c.hash) return undefined;
  return hash === undefined
    ? { code: 'missing', seq: c.seq, message: `event ${c.seq}, which ${which} attests, is missing` }
    : {
        code: 'checkpoint_mismatch',
        seq: c.seq,
        message: `event ${c.seq} is not the event ${which} attests (hash ${hash}, signed ${c.hash})`,
      };
}
