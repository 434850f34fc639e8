import type { JSONWebKeySet } from 'jose';
import { eventHash } from '../chain/event-hash.ts';
import { createCheckpointVerifier } from '../checkpoint/verify-checkpoint.ts';
import { headOf, type SignedCheckpoint } from '../checkpoint/sign-checkpoint.ts';
import { EvidenceBundle, type BundleSelection } from './bundle-format.ts';

/**
 * Why a bundle does not verify, at the first bad event `seq` (0 when it is not one event's):
 * - `malformed`: not a bundle of this format (the message names the field);
 * - `modified`: a full event's content does not match its hash;
 * - `broken_link`: an event's prev_hash is not the previous event's hash;
 * - `missing`: sequence numbers in the range skip;
 * - `not_selected`: a selected event does not belong to the selection it claims;
 * - `no_checkpoint`: no signed checkpoint covers the range;
 * - `bad_checkpoint`: the checkpoint's signature does not verify with the keys given;
 * - `checkpoint_mismatch`: a chain's run does not end at the head the checkpoint signs of it.
 */
export type BundleFailureCode =
  | 'malformed'
  | 'modified'
  | 'broken_link'
  | 'missing'
  | 'not_selected'
  | 'no_checkpoint'
  | 'bad_checkpoint'
  | 'checkpoint_mismatch';

export interface BundleReport {
  ok: boolean;
  failure?: { code: BundleFailureCode; seq: number; chain?: number; message: string };
  selected: number;
  /** Events whose hash was recomputed (selected or not). */
  recomputed: number;
  /** Other tenants' events in the range whose links were checked but content not. */
  redacted: number;
  /** The run of each chain the bundle carries. */
  chains: { chain: number; tenant: string | null; firstSeq: number; lastSeq: number }[];
  /** With one chain: its run. */
  range?: { firstSeq: number; lastSeq: number };
  period?: { from: string; to: string };
  checkpoint?: Omit<SignedCheckpoint, 'jws'>;
}

/**
 * Verifies an evidence bundle without a database: every full event's hash (over its chain),
 * every link of each chain's run, the checkpoint's signature with `keys` over the list of
 * every chain head it carries, and that each run ends at exactly the head the checkpoint
 * signs of its chain. Pure but for the signature check.
 */
export async function verifyBundle(input: unknown, keys: JSONWebKeySet): Promise<BundleReport> {
  const base = { selected: 0, recomputed: 0, redacted: 0, chains: [] };
  const parsed = EvidenceBundle.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return fail(
      base,
      'malformed',
      0,
      `not an evidence bundle: ${issue.path.join('.') || 'bundle'}: ${issue.message}`,
    );
  }
  const bundle = parsed.data;
  const report: BundleReport = { ...base, ok: false, chains: bundle.chains };
  if (bundle.chains.length === 1) {
    report.range = { firstSeq: bundle.chains[0]!.firstSeq, lastSeq: bundle.chains[0]!.lastSeq };
  }
  if (bundle.period) report.period = bundle.period;
  const events = bundle.events;
  if (events.length === 0) return { ...report, ok: true };

  // The checkpoint first: it says where chain 0's legacy segment ends.
  let checkpoint: SignedCheckpoint | undefined;
  if (bundle.checkpoint) {
    const checked = await createCheckpointVerifier(keys)(
      bundle.checkpoint.jws,
      bundle.checkpoint.heads,
    );
    if (!checked.ok) return fail(report, 'bad_checkpoint', 0, `the checkpoint: ${checked.message}`);
    checkpoint = checked.checkpoint;
    const { jws: _jws, ...rest } = checkpoint;
    report.checkpoint = rest;
  }
  const legacyUntil = checkpoint?.format === 1 ? Infinity : (checkpoint?.legacyUntil ?? 0);

  const runs: { chain: number; firstSeq: number; last: { seq: number; hash: string } }[] = [];
  let prev: { chain: number; seq: number; hash: string } | undefined;
  for (const e of events) {
    const at = { chain: e.chain };
    if (prev && e.chain !== prev.chain) {
      if (e.chain < prev.chain) {
        return fail(
          report,
          'malformed',
          e.seq,
          `its events are not ordered by chain (chain ${e.chain} after chain ${prev.chain})`,
          at,
        );
      }
      prev = undefined;
    }
    if (prev && e.seq !== prev.seq + 1) {
      return fail(
        report,
        'missing',
        prev.seq + 1,
        `the bundle skips from event ${prev.seq} to event ${e.seq} of chain ${e.chain}`,
        at,
      );
    }
    if ('redacted' in e) report.redacted++;
    else {
      if (e.legacy && !(e.chain === 0 && e.seq <= legacyUntil)) {
        return fail(
          report,
          'modified',
          e.seq,
          `event ${e.seq} of chain ${e.chain} claims the legacy hash formula, which only chain 0's events up to ${legacyUntil} have`,
          at,
        );
      }
      if (eventHash({ ...e, chain: e.legacy ? undefined : e.chain }) !== e.hash) {
        return fail(
          report,
          'modified',
          e.seq,
          `event ${e.seq} (${e.type}) of chain ${e.chain} was modified: its content does not match its hash ${e.hash}`,
          at,
        );
      }
      report.recomputed++;
      if (e.selected) {
        report.selected++;
        const why = outsideSelection(e.body, e.occurredAt, bundle.selection);
        if (why)
          return fail(
            report,
            'not_selected',
            e.seq,
            `event ${e.seq} of chain ${e.chain} is marked selected but ${why}`,
            at,
          );
      }
    }
    if (prev && e.prevHash !== prev.hash) {
      return fail(
        report,
        'broken_link',
        e.seq,
        `event ${e.seq} of chain ${e.chain} does not link to event ${prev.seq}: its prev_hash ${e.prevHash} is not ${prev.hash}`,
        at,
      );
    }
    if (!prev) runs.push({ chain: e.chain, firstSeq: e.seq, last: e });
    prev = { chain: e.chain, seq: e.seq, hash: e.hash };
    runs.at(-1)!.last = prev;
  }
  const claimed = bundle.chains.map((c) => `${c.chain}:${c.firstSeq}..${c.lastSeq}`).join(' ');
  const found = runs.map((r) => `${r.chain}:${r.firstSeq}..${r.last.seq}`).join(' ');
  if (claimed !== found) {
    return fail(
      report,
      'malformed',
      0,
      `its chains (${claimed}) do not match its events (${found})`,
    );
  }
  if (!checkpoint) {
    const r = runs.at(-1)!;
    return fail(
      report,
      'no_checkpoint',
      r.last.seq,
      `no signed checkpoint covers event ${r.last.seq} of chain ${r.chain}: run npm run -s audit:checkpoint, then export again`,
      { chain: r.chain },
    );
  }
  for (const r of runs) {
    const head = headOf(checkpoint, r.chain);
    if (!head || head.seq !== r.last.seq || head.hash !== r.last.hash) {
      return fail(
        report,
        'checkpoint_mismatch',
        r.last.seq,
        head
          ? `the checkpoint signs event ${head.seq} of chain ${r.chain} with hash ${head.hash}, but the bundle's run of it ends at event ${r.last.seq} with hash ${r.last.hash}`
          : `the checkpoint signs no head of chain ${r.chain}`,
        { chain: r.chain },
      );
    }
  }
  return { ...report, ok: true };
}

function fail<R extends Omit<BundleReport, 'ok'>>(
  report: R,
  code: BundleFailureCode,
  seq: number,
  message: string,
  at: { chain?: number } = {},
): BundleReport {
  return { ...report, ok: false, failure: { code, seq, ...at, message } };
}

function outsideSelection(
  body: string,
  occurredAt: string,
  s: BundleSelection,
): string | undefined {
  let b: { taskId?: unknown; tenant?: unknown };
  try {
    b = JSON.parse(body) as typeof b;
  } catch {
    return 'its body is not JSON';
  }
  if (s.tenant !== undefined && b.tenant !== s.tenant) return `it is not of tenant ${s.tenant}`;
  if (s.kind === 'task') return b.taskId === s.taskId ? undefined : `it is not of task ${s.taskId}`;
  const at = Date.parse(occurredAt);
  if (at < Date.parse(s.from) || at >= Date.parse(s.to)) return `it is outside ${s.from}..${s.to}`;
  return undefined;
}
