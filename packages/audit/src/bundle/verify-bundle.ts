import type { JSONWebKeySet } from 'jose';
import { eventHash } from '../chain/event-hash.ts';
import { createCheckpointVerifier } from '../checkpoint/verify-checkpoint.ts';
import type { SignedCheckpoint } from '../checkpoint/sign-checkpoint.ts';
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
 * - `checkpoint_mismatch`: the range does not end at the event the checkpoint signs.
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
  failure?: { code: BundleFailureCode; seq: number; message: string };
  selected: number;
  /** Events whose hash was recomputed (selected or not). */
  recomputed: number;
  /** Other tenants' events in the range whose links were checked but content not. */
  redacted: number;
  range?: { firstSeq: number; lastSeq: number };
  period?: { from: string; to: string };
  checkpoint?: Omit<SignedCheckpoint, 'jws'>;
}

/**
 * Verifies an evidence bundle without a database: every full event's hash, every link from
 * the first event to the last, the checkpoint's signature with `keys`, and that the last
 * event is the one it signs. Pure but for the signature check.
 */
export async function verifyBundle(input: unknown, keys: JSONWebKeySet): Promise<BundleReport> {
  const base = { selected: 0, recomputed: 0, redacted: 0 };
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
  const report: BundleReport = { ...base, ok: false };
  if (bundle.range) report.range = bundle.range;
  if (bundle.period) report.period = bundle.period;
  const events = bundle.events;
  if (events.length === 0) return { ...report, ok: true };

  let prev: { seq: number; hash: string } | undefined;
  for (const e of events) {
    if (prev && e.seq !== prev.seq + 1) {
      return fail(
        report,
        'missing',
        prev.seq + 1,
        `the bundle skips from event ${prev.seq} to event ${e.seq}`,
      );
    }
    if ('redacted' in e) report.redacted++;
    else {
      if (eventHash(e) !== e.hash) {
        return fail(
          report,
          'modified',
          e.seq,
          `event ${e.seq} (${e.type}) was modified: its content does not match its hash ${e.hash}`,
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
            `event ${e.seq} is marked selected but ${why}`,
          );
      }
    }
    if (prev && e.prevHash !== prev.hash) {
      return fail(
        report,
        'broken_link',
        e.seq,
        `event ${e.seq} does not link to event ${prev.seq}: its prev_hash ${e.prevHash} is not ${prev.hash}`,
      );
    }
    prev = { seq: e.seq, hash: e.hash };
  }
  const first = events[0]!.seq;
  const last = prev!;
  if (!bundle.range || bundle.range.firstSeq !== first || bundle.range.lastSeq !== last.seq) {
    return fail(
      report,
      'malformed',
      0,
      `its range does not match its events (${first}..${last.seq})`,
    );
  }
  if (!bundle.checkpoint) {
    return fail(
      report,
      'no_checkpoint',
      last.seq,
      `no signed checkpoint covers event ${last.seq}: run npm run -s audit:checkpoint, then export again`,
    );
  }
  const checked = await createCheckpointVerifier(keys)(bundle.checkpoint.jws);
  if (!checked.ok) return fail(report, 'bad_checkpoint', 0, `the checkpoint: ${checked.message}`);
  const { jws: _jws, ...checkpoint } = checked.checkpoint;
  report.checkpoint = checkpoint;
  if (checkpoint.seq !== last.seq || checkpoint.hash !== last.hash) {
    return fail(
      report,
      'checkpoint_mismatch',
      last.seq,
      `the checkpoint signs event ${checkpoint.seq} with hash ${checkpoint.hash}, but the bundle ends at event ${last.seq} with hash ${last.hash}`,
    );
  }
  return { ...report, ok: true };
}

function fail<R extends Omit<BundleReport, 'ok'>>(
  report: R,
  code: BundleFailureCode,
  seq: number,
  message: string,
): BundleReport {
  return { ...report, ok: false, failure: { code, seq, message } };
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
