import type { JSONWebKeySet } from 'jose';
import { createChainVerifier, type ChainFailure } from '../chain/chain-verifier.ts';
import { GENESIS_HASH } from '../chain/event-hash.ts';
import { createCheckpointVerifier } from '../checkpoint/verify-checkpoint.ts';
import { ARCHIVE_KIND, ARCHIVE_VERSION, type ArchiveHeader } from './archive-format.ts';

/**
 * Why an archive does not verify:
 * - `malformed`: not an archive of this format (a line is not JSON, the header is missing
 *   or wrong, an event lacks a field);
 * - `count_mismatch`: it holds other events than its header says (first, last, how many);
 * - `bad_checkpoint`: a checkpoint's signature does not verify with the keys given;
 * - `no_boundary_checkpoint`: no verified checkpoint attests its last event;
 * - `boundary_mismatch`: the previous month's checkpoint does not name what the first event
 *   links to;
 * - the chain's own codes (`modified`, `missing`, `broken_link` …) at the first bad event.
 */
export type ArchiveFailureCode =
  | 'malformed'
  | 'count_mismatch'
  | 'bad_checkpoint'
  | 'no_boundary_checkpoint'
  | 'boundary_mismatch'
  | ChainFailure['code'];

export type ArchiveVerification =
  | { ok: true; header: ArchiveHeader; events: number; checkpoints: number }
  | {
      ok: false;
      code: ArchiveFailureCode;
      message: string;
      seq?: number;
      header?: ArchiveHeader;
    };

/**
 * Verifies one exported month without a database: every event's hash and link from the
 * month's first event to its last, the columns against the bodies, the count against the
 * header, and the signed checkpoint of its last event (and of the month before, when given)
 * against `keys`. `lines` are the file's lines in order.
 */
export async function verifyArchive(
  lines: AsyncIterable<string> | Iterable<string>,
  keys: JSONWebKeySet,
): Promise<ArchiveVerification> {
  const verifyCheckpoint = createCheckpointVerifier(keys);
  let header: ArchiveHeader | undefined;
  let chain: ReturnType<typeof createChainVerifier> | undefined;
  const checkpoints: Array<{ seq: number; hash: string }> = [];
  let events = 0;
  let n = 0;
  const fail = (code: ArchiveFailureCode, message: string, seq?: number): ArchiveVerification => ({
    ok: false,
    code,
    message,
    ...(seq !== undefined ? { seq } : {}),
    ...(header ? { header } : {}),
  });

  // The checkpoints come right after the header, so the events stream through the chain
  // verifier one line at a time: a month of millions of events is never held in memory.
  const pending: Array<{ jws: string; line: number }> = [];
  const begin = async (): Promise<ArchiveVerification | undefined> => {
    for (const p of pending) {
      const v = await verifyCheckpoint(p.jws);
      if (!v.ok) return fail('bad_checkpoint', `the checkpoint on line ${p.line}: ${v.message}`);
      checkpoints.push({ seq: v.checkpoint.seq, hash: v.checkpoint.hash });
    }
    const h = header!;
    const boundary = checkpoints.find((c) => c.seq === h.lastSeq);
    if (!boundary || boundary.hash !== h.lastHash)
      return fail(
        'no_boundary_checkpoint',
        `no verified checkpoint attests the last event (seq ${h.lastSeq})`,
        h.lastSeq,
      );
    const before = checkpoints.find((c) => c.seq === h.firstSeq - 1);
    if (before && before.hash !== h.firstPrevHash)
      return fail(
        'boundary_mismatch',
        `the previous month's checkpoint (seq ${before.seq}) does not name the hash the first event links to`,
        h.firstSeq,
      );
    chain = createChainVerifier({
      anchor: { seq: h.firstSeq - 1, hash: h.firstPrevHash },
      checkpoints: checkpoints
        .filter((c) => c.seq >= h.firstSeq)
        .map((c) => ({ ...c, label: `the archive's checkpoint at event ${c.seq}` })),
    });
    return undefined;
  };
  for await (const raw of lines) {
    n++;
    const text = raw.trim();
    if (!text) continue;
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return fail('malformed', `line ${n} is not JSON`);
    }
    if (!header) {
      if (line.archive !== ARCHIVE_KIND || line.version !== ARCHIVE_VERSION || !isHeader(line))
        return fail('malformed', `line 1 is not a ${ARCHIVE_KIND} v${ARCHIVE_VERSION} header`);
      header = line as unknown as ArchiveHeader;
      if (header.firstSeq === 1 && header.firstPrevHash !== GENESIS_HASH)
        return fail(
          'boundary_mismatch',
          'the first event of the chain must link to the genesis hash',
          1,
        );
      continue;
    }
    if ('checkpoint' in line) {
      if (chain) return fail('malformed', `line ${n}: a checkpoint after the events`);
      const c = line.checkpoint as { jws?: unknown };
      if (typeof c?.jws !== 'string')
        return fail('malformed', `line ${n}: a checkpoint without jws`);
      pending.push({ jws: c.jws, line: n });
      continue;
    }
    if ('event' in line) {
      const e = line.event as Record<string, unknown>;
      if (
        !Number.isSafeInteger(e?.seq) ||
        typeof e.hash !== 'string' ||
        typeof e.body !== 'string' ||
        typeof e.prevHash !== 'string' ||
        typeof e.occurredAt !== 'string' ||
        typeof e.type !== 'string' ||
        typeof e.columns !== 'object'
      )
        return fail('malformed', `line ${n}: not an event`);
      if (!chain) {
        const refused = await begin();
        if (refused) return refused;
      }
      events++;
      const failure = chain!.push(e as never);
      if (failure) return fail(failure.code, failure.message, failure.seq);
      continue;
    }
    return fail('malformed', `line ${n} is neither an event nor a checkpoint`);
  }
  if (!header) return fail('malformed', 'the file is empty');
  if (!chain) {
    const refused = await begin();
    if (refused) return refused;
  }
  const end = chain!.finish();
  if (end) return fail(end.code, end.message, end.seq);
  const { firstSeq, lastSeq } = chain!.stats;
  if (
    events !== header.events ||
    firstSeq !== header.firstSeq ||
    lastSeq !== header.lastSeq ||
    header.events !== header.lastSeq - header.firstSeq + 1
  )
    return fail(
      'count_mismatch',
      `the header says events ${header.firstSeq}..${header.lastSeq} (${header.events}), the file holds ${events}${firstSeq !== undefined ? ` (${firstSeq}..${lastSeq})` : ''}`,
    );
  return { ok: true, header, events, checkpoints: checkpoints.length };
}

function isHeader(l: Record<string, unknown>): boolean {
  return (
    typeof l.partition === 'string' &&
    typeof l.rangeFrom === 'string' &&
    typeof l.rangeTo === 'string' &&
    Number.isSafeInteger(l.firstSeq) &&
    Number.isSafeInteger(l.lastSeq) &&
    Number.isSafeInteger(l.events) &&
    typeof l.firstPrevHash === 'string' &&
    typeof l.lastHash === 'string'
  );
}
