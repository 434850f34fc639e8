import { systemClock } from '@mtg/clock';
import type pg from 'pg';
import { listChains, readChain, readChainSession } from '../chain/read-chain.ts';
import type { ChainEvent } from '../chain/chain-verifier.ts';
import type { ChainHead } from '../checkpoint/sign-checkpoint.ts';
import { parseHeads } from '../verify-audit-trail.ts';
import {
  BUNDLE_FORMAT,
  type BundleEvent,
  type BundleSelection,
  type EvidenceBundle,
} from './bundle-format.ts';

export interface BuildBundleOptions {
  /**
   * Whose events are given in full. Events of other tenants inside a run (chain 0's legacy
   * segment only) are redacted (seq and hashes only). Unset: every event in full.
   */
  visibleTenant?: string;
  /** Refuse runs longer than this many events in all (default 200,000). */
  maxEvents?: number;
  now?: () => Date;
}

export type BuildBundleResult =
  { ok: true; bundle: EvidenceBundle } | { ok: false; code: 'too_large'; message: string };

/**
 * Reads the evidence for `selection` from one snapshot of the audit views (mtg_auditor is
 * enough): for each chain holding selected events, the run from the first selected event to
 * the head that the first signed checkpoint covering every such chain attests, with that
 * checkpoint and its list of heads. `client` must not be in a transaction.
 */
export async function buildBundle(
  client: pg.ClientBase,
  selection: BundleSelection,
  options: BuildBundleOptions = {},
): Promise<BuildBundleResult> {
  const maxEvents = options.maxEvents ?? 200_000;
  const tenant = selection.tenant;
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  try {
    await readChainSession(client);
    const bounds =
      selection.kind === 'task'
        ? await client.query<{ chain_id: string; first: string; last: string }>(
            `SELECT chain_id::text, min(seq)::text AS first, max(seq)::text AS last FROM audit.task_timeline
              WHERE task_id = $1 AND ($2::text IS NULL OR tenant = $2) GROUP BY chain_id ORDER BY chain_id`,
            [selection.taskId, tenant ?? null],
          )
        : await client.query<{ chain_id: string; first: string; last: string }>(
            `SELECT chain_id::text, min(seq)::text AS first, max(seq)::text AS last FROM audit.event_log
              WHERE occurred_at >= $1 AND occurred_at < $2 AND ($3::text IS NULL OR tenant = $3)
              GROUP BY chain_id ORDER BY chain_id`,
            [selection.from, selection.to, tenant ?? null],
          );
    const runs = bounds.rows.map((r) => ({
      chain: Number(r.chain_id),
      first: Number(r.first),
      last: Number(r.last),
    }));
    const empty: EvidenceBundle = {
      format: BUNDLE_FORMAT,
      createdAt: (options.now ?? systemClock)().toISOString(),
      selection,
      period: null,
      chains: [],
      checkpoint: null,
      events: [],
    };
    if (runs.length === 0) {
      await client.query('COMMIT');
      return { ok: true, bundle: empty };
    }
    const covering = await coveringCheckpoint(client, runs);
    const checkpoint = covering?.checkpoint ?? null;
    const ends = runs.map((r) => covering?.heads.find((h) => h.chain === r.chain)?.seq ?? r.last);
    const total = runs.reduce((n, r, i) => n + ends[i]! - r.first + 1, 0);
    if (total > maxEvents) {
      await client.query('COMMIT');
      return {
        ok: false,
        code: 'too_large',
        message: `the selection's runs hold ${total} events, more than ${maxEvents}: choose a shorter period`,
      };
    }
    const chains = new Map((await listChains(client)).map((c) => [c.chain, c]));
    const events: BundleEvent[] = [];
    const carried: EvidenceBundle['chains'] = [];
    let from: string | undefined;
    let to: string | undefined;
    for (const [i, run] of runs.entries()) {
      const record = chains.get(run.chain);
      let firstSeq: number | undefined;
      let lastSeq = 0;
      for await (const batch of readChain(client, {
        chain: run.chain,
        legacyUntil: record?.legacyUntil ?? 0,
        fromSeq: run.first,
        toSeq: ends[i]!,
      })) {
        for (const e of batch) {
          const selected = isSelected(e, selection);
          if (selected) {
            if (!from || e.occurredAt < from) from = e.occurredAt;
            if (!to || e.occurredAt > to) to = e.occurredAt;
          }
          firstSeq ??= e.seq;
          lastSeq = e.seq;
          events.push(toBundleEvent(run.chain, e, selected, options.visibleTenant));
        }
      }
      if (firstSeq !== undefined) {
        carried.push({ chain: run.chain, tenant: record?.tenant ?? null, firstSeq, lastSeq });
      }
    }
    await client.query('COMMIT');
    return {
      ok: true,
      bundle: {
        ...empty,
        period: from && to ? { from, to } : null,
        chains: carried,
        checkpoint,
        events,
      },
    };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

/**
 * The first stored checkpoint whose heads reach the last selected event of every run: one
 * signature then covers the whole bundle. Format 1 checkpoints (before chains) cover chain 0.
 */
async function coveringCheckpoint(
  client: pg.ClientBase,
  runs: { chain: number; last: number }[],
): Promise<{ checkpoint: { jws: string; heads?: ChainHead[] }; heads: ChainHead[] } | null> {
  const rows = await client.query<{
    jws: string;
    seq: string | null;
    hash: string | null;
    heads: string | null;
  }>({
    text: 'SELECT jws, seq, hash, heads FROM audit.checkpoint_log ORDER BY id',
    types: { getTypeParser: () => (v: string) => v },
  });
  for (const r of rows.rows) {
    const heads: ChainHead[] =
      r.heads !== null
        ? parseHeads(r.heads)
        : [{ chain: 0, seq: Number(r.seq), hash: r.hash ?? '' }];
    const covers = runs.every((run) => {
      const h = heads.find((x) => x.chain === run.chain);
      return h !== undefined && h.seq >= run.last;
    });
    if (covers) {
      // A format 1 checkpoint signs its one event itself: no list of heads goes with it.
      return { checkpoint: r.heads !== null ? { jws: r.jws, heads } : { jws: r.jws }, heads };
    }
  }
  return null;
}

function isSelected(e: ChainEvent, s: BundleSelection): boolean {
  if (s.tenant !== undefined && e.columns.tenant !== s.tenant) return false;
  if (s.kind === 'task') return e.columns.taskId === s.taskId;
  const at = Date.parse(e.occurredAt);
  return at >= Date.parse(s.from) && at < Date.parse(s.to);
}

function toBundleEvent(
  chain: number,
  e: ChainEvent,
  selected: boolean,
  visibleTenant?: string,
): BundleEvent {
  if (visibleTenant !== undefined && e.columns.tenant !== visibleTenant) {
    return { chain, seq: e.seq, prevHash: e.prevHash, hash: e.hash, redacted: true };
  }
  const { seq, occurredAt, type, prevHash, hash, body } = e;
  return {
    chain,
    seq,
    occurredAt,
    type,
    prevHash,
    hash,
    body,
    selected,
    ...(e.chain === undefined ? { legacy: true as const } : {}),
  };
}
