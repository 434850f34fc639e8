import type pg from 'pg';
import { readChain, readChainSession } from '../chain/read-chain.ts';
import type { ChainEvent } from '../chain/chain-verifier.ts';
import {
  BUNDLE_FORMAT,
  type BundleEvent,
  type BundleSelection,
  type EvidenceBundle,
} from './bundle-format.ts';

export interface BuildBundleOptions {
  /**
   * Whose events are given in full. Events of other tenants inside the range are redacted
   * (seq and hashes only). Unset: every event in full (an auditor of the whole deployment).
   */
  visibleTenant?: string;
  /** Refuse a range longer than this many events (default 200,000). */
  maxEvents?: number;
  now?: () => Date;
}

export type BuildBundleResult =
  { ok: true; bundle: EvidenceBundle } | { ok: false; code: 'too_large'; message: string };

/**
 * Reads the evidence for `selection` from one snapshot of the audit views (mtg_auditor is
 * enough): the run of the chain from the first selected event to the first signed
 * checkpoint at or after the last one, with that checkpoint. `client` must not be in a
 * transaction.
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
        ? await client.query<{ first: string | null; last: string | null }>(
            `SELECT min(seq)::text AS first, max(seq)::text AS last FROM audit.task_timeline
              WHERE task_id = $1 AND ($2::text IS NULL OR tenant = $2)`,
            [selection.taskId, tenant ?? null],
          )
        : await client.query<{ first: string | null; last: string | null }>(
            `SELECT min(seq)::text AS first, max(seq)::text AS last FROM audit.event_log
              WHERE occurred_at >= $1 AND occurred_at < $2 AND ($3::text IS NULL OR tenant = $3)`,
            [selection.from, selection.to, tenant ?? null],
          );
    const first = Number(bounds.rows[0]?.first ?? 0);
    const last = Number(bounds.rows[0]?.last ?? 0);
    const empty: EvidenceBundle = {
      format: BUNDLE_FORMAT,
      createdAt: (options.now?.() ?? new Date()).toISOString(),
      selection,
      period: null,
      range: null,
      checkpoint: null,
      events: [],
    };
    if (!first) {
      await client.query('COMMIT');
      return { ok: true, bundle: empty };
    }
    const cp = await client.query<{ seq: string; jws: string }>(
      `SELECT seq::text AS seq, jws FROM audit.checkpoint_log WHERE seq >= $1 ORDER BY seq, id LIMIT 1`,
      [last],
    );
    const end = cp.rows[0] ? Number(cp.rows[0].seq) : last;
    if (end - first + 1 > maxEvents) {
      await client.query('COMMIT');
      return {
        ok: false,
        code: 'too_large',
        message: `the range ${first}..${end} holds ${end - first + 1} events, more than ${maxEvents}: choose a shorter period`,
      };
    }
    const events: BundleEvent[] = [];
    let from: string | undefined;
    let to: string | undefined;
    for await (const batch of readChain(client, { fromSeq: first, toSeq: end })) {
      for (const e of batch) {
        const selected = isSelected(e, selection);
        if (selected) {
          from ??= e.occurredAt;
          to = e.occurredAt;
        }
        events.push(toBundleEvent(e, selected, options.visibleTenant));
      }
    }
    await client.query('COMMIT');
    return {
      ok: true,
      bundle: {
        ...empty,
        period: from && to ? { from, to } : null,
        range: events.length ? { firstSeq: events[0]!.seq, lastSeq: events.at(-1)!.seq } : null,
        checkpoint: cp.rows[0] ? { jws: cp.rows[0].jws } : null,
        events,
      },
    };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

function isSelected(e: ChainEvent, s: BundleSelection): boolean {
  if (s.tenant !== undefined && e.columns.tenant !== s.tenant) return false;
  if (s.kind === 'task') return e.columns.taskId === s.taskId;
  const at = Date.parse(e.occurredAt);
  return at >= Date.parse(s.from) && at < Date.parse(s.to);
}

function toBundleEvent(e: ChainEvent, selected: boolean, visibleTenant?: string): BundleEvent {
  if (visibleTenant !== undefined && e.columns.tenant !== visibleTenant) {
    return { seq: e.seq, prevHash: e.prevHash, hash: e.hash, redacted: true };
  }
  const { seq, occurredAt, type, prevHash, hash, body } = e;
  return { seq, occurredAt, type, prevHash, hash, body, selected };
}
