import type { JSONWebKeySet } from 'jose';
import { createChainVerifier, type ChainFailure } from '../chain/chain-verifier.ts';
import { GENESIS_HASH } from '../chain/event-hash.ts';
import { headOf, type ChainHead, type SignedCheckpoint } from '../checkpoint/sign-checkpoint.ts';
import { createCheckpointVerifier } from '../checkpoint/verify-checkpoint.ts';
import { ARCHIVE_KIND, ARCHIVE_VERSION, type ArchiveHeader } from './archive-format.ts';

/**
 * Why an archive does not verify:
 * - `malformed`: not an archive of this format (a line is not JSON, the header is missing
 *   or wrong, an event lacks a field);
 * - `count_mismatch`: it holds other events than its header says (first, last, how many);
 * - `bad_checkpoint`: a checkpoint's signature does not verify with the keys given;
 * - `no_boundary_checkpoint`: no verified checkpoint attests the last event of a chain in it;
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
      chain?: number;
      header?: ArchiveHeader;
    };

/**
 * Verifies one exported month without a database: for each chain in it, every event's hash
 * and link from its first event in the month to its last, the columns and tenant against the
 * bodies, the count against the header, and the signed checkpoint at the month's end (and
 * the month before's, when given) against `keys`: it must attest every chain's last event.
 * `lines` are the file's lines in order.
 */
export async function verifyArchive(
  lines: AsyncIterable<string> | Iterable<string>,
  keys: JSONWebKeySet,
): Promise<ArchiveVerification> {
  const verifyCheckpoint = createCheckpointVerifier(keys);
  let header: ArchiveHeader | undefined;
  const verified: SignedCheckpoint[] = [];
  let legacyUntil = 0;
  // The chain being read: its index in the header, its verifier and count.
  let current:
    { index: number; verifier: ReturnType<typeof createChainVerifier>; events: number } | undefined;
  let started = false;
  let events = 0;
  let n = 0;
  const fail = (
    code: ArchiveFailureCode,
    message: string,
    seq?: number,
    chain?: number,
  ): ArchiveVerification => ({
    ok: false,
    code,
    message,
    ...(seq !== undefined ? { seq } : {}),
    ...(chain !== undefined ? { chain } : {}),
    ...(header ? { header } : {}),
  });

  // The checkpoints come right after the header, so the events stream through the chain
  // verifiers one line at a time: a month of millions of events is never held in memory.
  const pending: Array<{ jws: string; heads?: ChainHead[]; line: number }> = [];
  const begin = async (): Promise<ArchiveVerification | undefined> => {
    started = true;
    for (const p of pending) {
      const v = await verifyCheckpoint(p.jws, p.heads);
      if (!v.ok) return fail('bad_checkpoint', `the checkpoint on line ${p.line}: ${v.message}`);
      verified.push(v.checkpoint);
    }
    legacyUntil = Math.max(
      0,
      ...verified.map((v) => (v.format === 1 ? Number.MAX_SAFE_INTEGER : (v.legacyUntil ?? 0))),
    );
    for (const c of header!.chains) {
      const boundary = verified.some((v) => {
        const h = headOf(v, c.chain);
        return h?.seq === c.lastSeq && h.hash === c.lastHash;
      });
      if (!boundary)
        return fail(
          'no_boundary_checkpoint',
          `no verified checkpoint attests the last event of chain ${c.chain} (seq ${c.lastSeq})`,
          c.lastSeq,
          c.chain,
        );
      for (const v of verified) {
        const before = headOf(v, c.chain);
        if (before?.seq === c.firstSeq - 1 && before.hash !== c.firstPrevHash)
          return fail(
            'boundary_mismatch',
            `the previous month's checkpoint (seq ${before.seq} of chain ${c.chain}) does not name the hash the first event links to`,
            c.firstSeq,
            c.chain,
          );
      }
      if (c.firstSeq === 1 && c.firstPrevHash !== GENESIS_HASH)
        return fail(
          'boundary_mismatch',
          `the first event of chain ${c.chain} must link to the genesis hash`,
          1,
          c.chain,
        );
    }
    return undefined;
  };
  const open = (index: number) => {
    const c = header!.chains[index]!;
    current = {
      index,
      events: 0,
      verifier: createChainVerifier({
        anchor: { seq: c.firstSeq - 1, hash: c.firstPrevHash },
        checkpoints: verified.flatMap((v) => {
          const h = headOf(v, c.chain);
          return h && h.seq >= c.firstSeq
            ? [{ seq: h.seq, hash: h.hash, label: `the archive's checkpoint at event ${h.seq}` }]
            : [];
        }),
        chain: { id: c.chain, tenant: c.tenant, legacyUntil },
      }),
    };
  };
  const close = (): ArchiveVerification | undefined => {
    if (!current) return undefined;
    const c = header!.chains[current.index]!;
    const end = current.verifier.finish();
    if (end) return fail(end.code, end.message, end.seq, c.chain);
    const { firstSeq, lastSeq } = current.verifier.stats;
    if (current.events !== c.events || firstSeq !== c.firstSeq || lastSeq !== c.lastSeq)
      return fail(
        'count_mismatch',
        `the header says events ${c.firstSeq}..${c.lastSeq} (${c.events}) of chain ${c.chain}, the file holds ${current.events}${firstSeq !== undefined ? ` (${firstSeq}..${lastSeq})` : ''}`,
        undefined,
        c.chain,
      );
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
      continue;
    }
    if ('checkpoint' in line) {
      if (started) return fail('malformed', `line ${n}: a checkpoint after the events`);
      const c = line.checkpoint as { jws?: unknown; heads?: unknown };
      if (typeof c?.jws !== 'string')
        return fail('malformed', `line ${n}: a checkpoint without jws`);
      pending.push({
        jws: c.jws,
        ...(Array.isArray(c.heads) ? { heads: c.heads as ChainHead[] } : {}),
        line: n,
      });
      continue;
    }
    if ('event' in line) {
      const e = line.event as Record<string, unknown>;
      if (
        !Number.isSafeInteger(e?.seq) ||
        !Number.isSafeInteger(e.chainId) ||
        (e.chain !== undefined && e.chain !== e.chainId) ||
        typeof e.hash !== 'string' ||
        typeof e.body !== 'string' ||
        typeof e.prevHash !== 'string' ||
        typeof e.occurredAt !== 'string' ||
        typeof e.type !== 'string' ||
        typeof e.columns !== 'object'
      )
        return fail('malformed', `line ${n}: not an event`);
      if (!started) {
        const refused = await begin();
        if (refused) return refused;
      }
      if (!current || header.chains[current.index]!.chain !== e.chainId) {
        const closed = close();
        if (closed) return closed;
        const index = header.chains.findIndex((c) => c.chain === e.chainId);
        if (index <= (current?.index ?? -1))
          return fail(
            'malformed',
            `line ${n}: an event of chain ${String(e.chainId)}, which the header does not list here`,
          );
        open(index);
      }
      // Hashed without its chain (the legacy formula) only in chain 0's legacy segment.
      if (e.chain === undefined && !(e.chainId === 0 && (e.seq as number) <= legacyUntil))
        return fail(
          'modified',
          `event ${String(e.seq)} of chain ${String(e.chainId)} claims the legacy hash formula`,
          e.seq as number,
          e.chainId as number,
        );
      events++;
      current!.events++;
      const failure = current!.verifier.push(e as never);
      if (failure) return fail(failure.code, failure.message, failure.seq, e.chainId as number);
      continue;
    }
    return fail('malformed', `line ${n} is neither an event nor a checkpoint`);
  }
  if (!header) return fail('malformed', 'the file is empty');
  if (!started) {
    const refused = await begin();
    if (refused) return refused;
  }
  const closed = close();
  if (closed) return closed;
  const listed = header.chains.length;
  const read = current ? current.index + 1 : 0;
  if (read !== listed || events !== header.events)
    return fail(
      'count_mismatch',
      `the header lists ${listed} chains and ${header.events} events, the file holds ${events} events of ${read} of them`,
    );
  return { ok: true, header, events, checkpoints: verified.length };
}

function isHeader(l: Record<string, unknown>): boolean {
  return (
    typeof l.partition === 'string' &&
    typeof l.rangeFrom === 'string' &&
    typeof l.rangeTo === 'string' &&
    Number.isSafeInteger(l.events) &&
    Array.isArray(l.chains) &&
    (l.chains as Record<string, unknown>[]).every(
      (c) =>
        Number.isSafeInteger(c?.chain) &&
        (c.tenant === null || typeof c.tenant === 'string') &&
        Number.isSafeInteger(c.firstSeq) &&
        Number.isSafeInteger(c.lastSeq) &&
        Number.isSafeInteger(c.events) &&
        typeof c.firstPrevHash === 'string' &&
        typeof c.lastHash === 'string',
    )
  );
}
