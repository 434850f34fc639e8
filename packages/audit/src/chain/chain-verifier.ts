import { eventHash, GENESIS_HASH, type HashedFields } from './event-hash.ts';

/** One stored event: the hashed fields plus the query columns copied from the body. */
export interface ChainEvent extends HashedFields {
  hash: string;
  columns: EventColumns;
  /** The chain it is stored in (audit.events.chain_id), whether or not its hash covers it. */
  chainId?: number;
}

/** The query columns of audit.events (task_id … actor_kind), as stored. */
export interface EventColumns {
  taskId: string | null;
  tenant: string | null;
  subject: string | null;
  client: string | null;
  tool: string | null;
  reason: string | null;
  correlationId: string | null;
  actorSubject: string | null;
  actorKind: string | null;
}

/**
 * What is wrong with the chain, at the first bad event `seq`:
 * - `modified`: the event's content (or a query column) no longer matches its hash;
 * - `missing`: sequence numbers skip (events deleted), from `seq` on;
 * - `reordered`: the event at `seq` was hashed with another sequence number;
 * - `inserted`: the event at `seq` is not part of the chain that was written (a duplicate
 *   sequence number, or an event the rest of the chain skips over);
 * - `broken_link`: the event at `seq` is intact but does not link to its predecessor (it was
 *   inserted with a forged hash, or its predecessor was rewritten together with its hash);
 * - `checkpoint_mismatch`: the event at `seq` is not the one a signed checkpoint attests (the
 *   chain up to it was rewritten and rehashed);
 * - `truncated`: the chain ends before `seq`, which a signed checkpoint attests (also: nothing
 *   is stored from the starting checkpoint's event on, or the chain's recorded head lies
 *   beyond its last stored event);
 * - `wrong_chain`: the event at `seq` is intact but belongs to another tenant's chain (its
 *   hashed tenant is not the chain's).
 */
export type ChainFailureCode =
  | 'modified'
  | 'missing'
  | 'reordered'
  | 'inserted'
  | 'broken_link'
  | 'checkpoint_mismatch'
  | 'truncated'
  | 'wrong_chain';

export interface ChainFailure {
  code: ChainFailureCode;
  /** The first bad event's sequence number. */
  seq: number;
  message: string;
}

/** A (seq, hash) the chain must pass through, attested by a signed checkpoint. */
export interface ChainAnchor {
  seq: number;
  hash: string;
  /** For messages: "checkpoint signed 2026-11-29T… by key …". */
  label?: string;
}

export interface ChainVerifierOptions {
  /** Where verification starts. Default: seq 0 with GENESIS_HASH (the whole chain). */
  anchor?: ChainAnchor;
  /** Signed checkpoints to match on the way (those before the anchor are ignored). */
  checkpoints?: ChainAnchor[];
  /**
   * Whether some event before the anchor is still stored. Then the anchor's own event must be
   * stored too: only archiving, which removes every event up to a signed boundary, may take it.
   */
  olderEventsStored?: boolean;
  /**
   * The chain being verified: its events must be of its tenant (chain 0: of none, after its
   * legacy segment, which holds every tenant's events from before there were chains).
   */
  chain?: { id: number; tenant: string | null; legacyUntil: number };
  /**
   * The head audit.chains records for the chain (what the next append will link to): the
   * chain must end exactly there. A head beyond the last stored event is a cut tail even
   * with no checkpoint after it; a last event beyond the head was not written by append.
   * Also lets a chain whose every event from the anchor on was archived (nothing stored,
   * nothing older stored, the recorded head is the anchor) pass.
   */
  recordedHead?: { seq: number; hash: string };
}

export interface ChainVerifier {
  /** Checks the next event in seq order; returns the first failure once there is one. */
  push(event: ChainEvent): ChainFailure | undefined;
  /** Checks the end of the chain; returns the first failure, if any. */
  finish(): ChainFailure | undefined;
  readonly stats: {
    events: number;
    firstSeq?: number;
    lastSeq?: number;
    checkpointsMatched: number;
  };
}

// How far away a moved event's original sequence number is looked for.
const REORDER_WINDOW = 8;

interface Previous {
  seq: number;
  hash: string;
  /** The predecessor's own prev_hash; undefined for the anchor. */
  prevHash?: string;
}

/**
 * The chain checks, free of I/O: feed events in seq order (from seq > anchor.seq, or the
 * anchor's own event first when it is still stored) and the verifier reports the first bad
 * one. A failure found at an event whose content does not match its hash is decided only
 * once the next event is seen: that event can show the bad one was inserted.
 */
export function createChainVerifier(options: ChainVerifierOptions = {}): ChainVerifier {
  const anchor = options.anchor ?? { seq: 0, hash: GENESIS_HASH };
  const bySeq = new Map<number, ChainAnchor[]>();
  for (const c of options.checkpoints ?? []) {
    if (c.seq < anchor.seq) continue;
    const list = bySeq.get(c.seq) ?? [];
    list.push(c);
    bySeq.set(c.seq, list);
  }
  let prev: Previous = { seq: anchor.seq, hash: anchor.hash };
  let failure: ChainFailure | undefined;
  // A content failure at `prev`, pending the next event's evidence.
  let pending: ChainFailure | undefined;
  let lastMatched: ChainAnchor | undefined = anchor.seq > 0 ? anchor : undefined;
  const stats = {
    events: 0,
    firstSeq: undefined as number | undefined,
    lastSeq: undefined as number | undefined,
    checkpointsMatched: 0,
  };

  const fail = (f: ChainFailure) => (failure = f);

  function push(e: ChainEvent): ChainFailure | undefined {
    if (failure) return failure;
    stats.events++;
    stats.firstSeq ??= e.seq;
    stats.lastSeq = e.seq;

    // The anchor's own event, still stored: it must be the one the checkpoint signed.
    if (stats.events === 1 && anchor.seq > 0 && e.seq === anchor.seq) {
      const own = contentProblem(e);
      if (own) return fail(own);
      if (e.hash !== anchor.hash) {
        return fail({
          code: 'checkpoint_mismatch',
          seq: e.seq,
          message: `event ${e.seq} is not the event the starting checkpoint attests (${label(anchor)}): hash ${e.hash}, signed ${anchor.hash}`,
        });
      }
      prev = { seq: e.seq, hash: e.hash, prevHash: e.prevHash };
      matchCheckpoints(e);
      return failure;
    }

    // The anchor's own event is gone while older ones are not: it was deleted, not archived.
    if (stats.events === 1 && anchor.seq > 0 && options.olderEventsStored) {
      return fail({
        code: 'missing',
        seq: anchor.seq,
        message: `event ${anchor.seq}, which the starting checkpoint ${label(anchor)} attests, is missing: older events are still stored, so it was deleted, not archived`,
      });
    }

    if (pending) {
      if (insertedBefore(e)) return fail(inserted(prev.seq, e.seq));
      return fail(pending);
    }

    if (e.seq === prev.seq && stats.events > 1) {
      return fail({
        code: 'inserted',
        seq: e.seq,
        message: `event ${e.seq} appears twice: an extra event was inserted with that sequence number`,
      });
    }
    if (e.seq > prev.seq + 1) {
      const first = prev.seq + 1;
      const last = e.seq - 1;
      const which =
        first === last ? `event ${first} is missing` : `events ${first}..${last} are missing`;
      const hint =
        prev.seq === 0
          ? ' (archived? verify from the boundary checkpoint with --from-checkpoint)'
          : '';
      return fail({
        code: 'missing',
        seq: first,
        message: `${which}: the chain goes from ${prev.seq === 0 ? 'its start' : `event ${prev.seq}`} to event ${e.seq}${hint}`,
      });
    }
    if (e.seq < prev.seq) {
      return fail({
        code: 'reordered',
        seq: e.seq,
        message: `event ${e.seq} comes after event ${prev.seq}`,
      });
    }

    const problem = contentProblem(e) ?? tenantProblem(e);
    if (problem) {
      if (insertedBefore(e)) return fail(inserted(prev.seq, e.seq));
      // Let the next event say whether this one was inserted.
      pending = problem;
      prev = { seq: e.seq, hash: e.hash, prevHash: e.prevHash };
      return undefined;
    }
    if (e.prevHash !== prev.hash) {
      const predecessor =
        prev.seq === anchor.seq && anchor.seq > 0
          ? `the starting checkpoint (${label(anchor)})`
          : prev.seq === 0
            ? 'the genesis value'
            : `event ${prev.seq}'s hash`;
      return fail({
        code: 'broken_link',
        seq: e.seq,
        message: `event ${e.seq} does not link to its predecessor: its prev_hash ${e.prevHash} is not ${predecessor} ${prev.hash} (event ${e.seq} was inserted, or event ${prev.seq} was rewritten with a new hash)`,
      });
    }
    prev = { seq: e.seq, hash: e.hash, prevHash: e.prevHash };
    matchCheckpoints(e);
    return failure;
  }

  // `e` is the original of its predecessor's seq (hashed one lower) and links to the same
  // event as its predecessor does: the predecessor was slipped in front of it.
  function insertedBefore(e: ChainEvent): boolean {
    return (
      e.seq === prev.seq + 1 &&
      prev.prevHash !== undefined &&
      e.prevHash === prev.prevHash &&
      e.hash === eventHash({ ...e, seq: e.seq - 1 })
    );
  }

  function matchCheckpoints(e: ChainEvent) {
    const list = bySeq.get(e.seq);
    if (!list) return;
    for (const c of list) {
      if (c.hash !== e.hash) {
        const since = lastMatched
          ? `after the checkpoint at event ${lastMatched.seq}, which still matches`
          : 'from the start';
        fail({
          code: 'checkpoint_mismatch',
          seq: e.seq,
          message: `event ${e.seq} is not the event checkpoint ${label(c)} attests (hash ${e.hash}, signed ${c.hash}): the chain up to it was rewritten, ${since}`,
        });
        return;
      }
      stats.checkpointsMatched++;
      lastMatched = c;
    }
    bySeq.delete(e.seq);
  }

  function tenantProblem(e: ChainEvent): ChainFailure | undefined {
    const c = options.chain;
    if (!c || (c.id === 0 && e.seq <= c.legacyUntil)) return undefined;
    if (e.columns.tenant === c.tenant) return undefined;
    return {
      code: 'wrong_chain',
      seq: e.seq,
      message: `event ${e.seq} is of ${e.columns.tenant === null ? 'no tenant' : `tenant ${JSON.stringify(e.columns.tenant)}`}, not of this chain's ${c.tenant === null ? 'system events' : `tenant ${JSON.stringify(c.tenant)}`}: it was written into the wrong chain`,
    };
  }

  function finish(): ChainFailure | undefined {
    if (failure) return failure;
    if (pending) return fail(pending);
    const head = options.recordedHead;
    const archived =
      head !== undefined &&
      !options.olderEventsStored &&
      head.seq === anchor.seq &&
      head.hash === anchor.hash;
    // A start from a checkpoint with nothing stored from its event on: the tail was cut.
    if (anchor.seq > 0 && stats.events === 0 && !archived) {
      return fail({
        code: 'truncated',
        seq: anchor.seq,
        message: `the chain ends before event ${anchor.seq}, which the starting checkpoint ${label(anchor)} attests: event ${anchor.seq} and every later one are gone`,
      });
    }
    const lastSeq = prev.seq;
    let furthest: ChainAnchor | undefined;
    for (const [seq, list] of bySeq) {
      if (seq > lastSeq && (!furthest || seq > furthest.seq)) furthest = list[0];
    }
    if (furthest) {
      return fail({
        code: 'truncated',
        seq: lastSeq + 1,
        message: `the chain ends at event ${lastSeq}, but checkpoint ${label(furthest)} attests event ${furthest.seq}: events ${lastSeq + 1}..${furthest.seq} are gone`,
      });
    }
    if (head && head.seq > lastSeq) {
      return fail({
        code: 'truncated',
        seq: lastSeq + 1,
        message: `the chain ends at event ${lastSeq}, but its recorded head (audit.chains) is event ${head.seq}: events ${lastSeq + 1}..${head.seq} are gone`,
      });
    }
    if (head && head.seq < lastSeq) {
      return fail({
        code: 'inserted',
        seq: head.seq + 1,
        message: `events ${head.seq + 1}..${lastSeq} come after the chain's recorded head (audit.chains, event ${head.seq}): they were not appended through audit.append`,
      });
    }
    if (head && stats.events > 0 && head.hash !== prev.hash) {
      return fail({
        code: 'modified',
        seq: lastSeq,
        message: `event ${lastSeq} is not the head the chain recorded (audit.chains): hash ${prev.hash}, recorded ${head.hash}`,
      });
    }
    return undefined;
  }

  return { push, finish, stats };
}

function inserted(seq: number, next: number): ChainFailure {
  return {
    code: 'inserted',
    seq,
    message: `event ${seq} was inserted: the event now numbered ${next} is the original event ${seq} (it was hashed as ${seq} and links to event ${seq - 1})`,
  };
}

function label(c: ChainAnchor): string {
  return c.label ?? `at event ${c.seq}`;
}

/** The event's own consistency: its hash over its content, and its columns against the body. */
function contentProblem(e: ChainEvent): ChainFailure | undefined {
  if (eventHash(e) !== e.hash) {
    for (let d = 1; d <= REORDER_WINDOW; d++) {
      for (const s of [e.seq - d, e.seq + d]) {
        if (s > 0 && eventHash({ ...e, seq: s }) === e.hash) {
          return {
            code: 'reordered',
            seq: e.seq,
            message: `event ${e.seq} was moved: it is the event originally numbered ${s} (its hash matches seq ${s}, not ${e.seq})`,
          };
        }
      }
    }
    return {
      code: 'modified',
      seq: e.seq,
      message: `event ${e.seq} was modified: its content no longer matches its hash ${e.hash}`,
    };
  }
  const column = columnMismatch(e);
  if (column) {
    return { code: 'modified', seq: e.seq, message: `event ${e.seq} was modified: ${column}` };
  }
  return undefined;
}

const COLUMN_SOURCES: [keyof EventColumns, string, (body: Record<string, unknown>) => unknown][] = [
  ['taskId', 'task_id', (b) => b.taskId],
  ['tenant', 'tenant', (b) => b.tenant],
  ['subject', 'subject', (b) => b.subject],
  ['client', 'client', (b) => b.client],
  ['tool', 'tool', (b) => b.tool],
  ['reason', 'reason', (b) => b.reason],
  ['correlationId', 'correlation_id', (b) => b.correlationId],
  ['actorSubject', 'actor_subject', (b) => actorOf(b)?.subject],
  ['actorKind', 'actor_kind', (b) => actorOf(b)?.kind],
];

function actorOf(b: Record<string, unknown>): Record<string, unknown> | undefined {
  const a = b.actor;
  return a && typeof a === 'object' && !Array.isArray(a)
    ? (a as Record<string, unknown>)
    : undefined;
}

/**
 * The query columns must say what the hashed body says: they are what the auditor views
 * filter on, and the hash does not cover them.
 */
function columnMismatch(e: ChainEvent): string | undefined {
  let body: unknown;
  try {
    body = JSON.parse(e.body);
  } catch {
    return 'its body is not JSON';
  }
  if (!body || typeof body !== 'object' || Array.isArray(body))
    return 'its body is not a JSON object';
  for (const [key, column, read] of COLUMN_SOURCES) {
    const expected = columnText(read(body as Record<string, unknown>));
    if (expected === undefined) continue; // an object or a fraction: not compared
    if (expected !== e.columns[key]) {
      return `its column ${column} is ${JSON.stringify(e.columns[key])}, but the hashed body says ${JSON.stringify(expected)}`;
    }
  }
  return undefined;
}

/** What `body->>'x'` gave in append(), for the values it can be compared with. */
function columnText(v: unknown): string | null | undefined {
  if (v === undefined || v === null) return null;
  // append() parses the body with \u0000 replaced: jsonb refuses it.
  if (typeof v === 'string') return v.includes('\u0000') ? v.replaceAll('\u0000', '\ufffd') : v;
  if (typeof v === 'boolean') return String(v);
  if (typeof v === 'number' && Number.isSafeInteger(v)) return String(v);
  return undefined;
}
