import type { JSONWebKeySet } from 'jose';
import type pg from 'pg';
import { createChainVerifier, type ChainEvent, type ChainFailure } from './chain/chain-verifier.ts';
import { GENESIS_HASH } from './chain/event-hash.ts';
import { readChainSession, streamChain } from './chain/read-chain.ts';
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
 * chain, or a stored checkpoint with a bad signature, is refused. Periodic runs so verify
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
  let target: ChainEvent | undefined;
  let since: SignedCheckpoint | undefined;
  let verifiedEvents = 0;
  let skipped = 0;
  try {
    await readChainSession(client);
    const head = Number((await client.query('SELECT seq FROM audit.chain_head')).rows[0]?.seq ?? 0);
    if (head === 0) {
      await client.query('ROLLBACK');
      return { ok: false, code: 'empty', message: 'the audit trail is empty: nothing to sign' };
    }
    const targetSeq = options.seq ?? head;
    if (!Number.isSafeInteger(targetSeq) || targetSeq < 1 || targetSeq > head) {
      await client.query('ROLLBACK');
      return {
        ok: false,
        code: 'no_such_event',
        message: `there is no event ${targetSeq} (the head is event ${head})`,
      };
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
    const chain = createChainVerifier({ anchor });
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
