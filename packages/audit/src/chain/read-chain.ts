import type pg from 'pg';
import type { ChainEvent } from './chain-verifier.ts';
import { canonicalTimestamp } from './event-hash.ts';

const COLUMNS = `seq, occurred_at, type, prev_hash, hash, body, task_id, tenant, subject, client,
  tool, reason, correlation_id, actor_subject, actor_kind, chain_id`;
const CURSOR = 'audit_chain';

export interface ReadChainOptions {
  /** The chain to read. Unset: every chain, ordered by chain then seq. */
  chain?: number;
  /**
   * Chain 0's last event hashed without a chain line (audit.chain_heads.legacy_until): its
   * events up to there come without `chain`, so eventHash() recomputes the formula they were
   * written with. Default 0.
   */
  legacyUntil?: number;
  /** First sequence number to read (inclusive). */
  fromSeq: number;
  /** Last sequence number to read (inclusive); default: to the end. */
  toSeq?: number;
  /** Rows per batch (one Execute of the cursor). */
  batchSize?: number;
}

/** One row as PostgreSQL's text, in the order of COLUMNS. */
type Row = (string | null)[];

/**
 * Streams audit.event_log in seq order through a server-side cursor, a batch at a time, never
 * holding more than two batches. The caller owns the transaction (BEGIN ... REPEATABLE READ,
 * so the events, the head and the checkpoints are read from one snapshot) and must run it
 * with TimeZone UTC and DateStyle ISO (readChainSession()).
 */
export async function* readChain(
  client: pg.ClientBase,
  options: ReadChainOptions,
): AsyncGenerator<ChainEvent[]> {
  const batch = batchSizeOf(options);
  const toEvent = eventOf(options);
  await declareCursor(client, options);
  const fetch = () => {
    const rows: Row[] = [];
    const p = executeCursor(client, batch, (row) => void rows.push(row)).then((more) => ({
      rows,
      more,
    }));
    // Handled where it is awaited; this keeps a failure during a yield from counting as
    // an unhandled rejection.
    p.catch(() => {});
    return p;
  };
  // One batch in flight while the previous one is checked.
  let next = fetch();
  try {
    for (;;) {
      const { rows, more } = await next;
      if (rows.length === 0) break;
      next = more ? fetch() : Promise.resolve({ rows: [], more: false });
      yield rows.map(toEvent);
    }
  } finally {
    // A consumer that stops early leaves a batch in flight: let it settle first.
    await next.catch(() => {});
    await client.query(`CLOSE ${CURSOR}`).catch(() => {});
  }
}

/**
 * Like readChain(), but hands each event to `onEvent` as its row arrives instead of building
 * batches, so nothing outlives its row. audit:verify uses it: with two 5000-row batches alive
 * at any time, the young-generation garbage collector kept copying them, about half of the
 * verifier's CPU time in a measured run of 100,000 events. `onEvent` returns false to stop.
 * Results match readChain()'s: once `onEvent` has said stop, the rest of that batch is still
 * converted (an unreadable row there throws, as it did when readChain() converted a whole
 * batch before handing it over), later batches are not. The same session and transaction
 * requirements as readChain().
 */
export async function streamChain(
  client: pg.ClientBase,
  options: ReadChainOptions,
  onEvent: (event: ChainEvent) => boolean,
): Promise<void> {
  const batch = batchSizeOf(options);
  const toEvent = eventOf(options);
  await declareCursor(client, options);
  let batches = 0;
  let stoppedIn = Infinity; // the batch during which onEvent said stop
  const fetch = () => {
    const index = batches++;
    // An exception here would escape into pg's socket handler: keep the first one and fail
    // the batch with it once the batch is over.
    let failure: { error: unknown } | undefined;
    const p = executeCursor(client, batch, (row) => {
      if (failure || index > stoppedIn) return;
      try {
        const event = toEvent(row);
        if (index < stoppedIn && !onEvent(event)) stoppedIn = index;
      } catch (error) {
        failure = { error };
        stoppedIn = Math.min(stoppedIn, index);
      }
    }).then((more) => {
      if (failure) throw failure.error;
      return more;
    });
    // Handled where it is awaited; this keeps a failure of one batch from leaving the
    // rejection of the one queued behind it unhandled.
    p.catch(() => {});
    return p;
  };
  // The next batch is queued while this one streams: it goes out as soon as this one ends.
  let next = fetch();
  try {
    for (;;) {
      const current = next;
      next = fetch();
      if (!(await current) || stoppedIn !== Infinity) break;
    }
  } finally {
    await next.catch(() => {});
    await client.query(`CLOSE ${CURSOR}`).catch(() => {});
  }
}

/** Session settings readChain() relies on, for the current transaction. */
export async function readChainSession(client: pg.ClientBase): Promise<void> {
  await client.query(`SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO'`);
}

// Execute takes 0 rows to mean all of them.
function batchSizeOf(options: ReadChainOptions): number {
  const batch = options.batchSize ?? 5000;
  if (!(Number.isSafeInteger(batch) && batch > 0)) {
    throw new TypeError(`readChain: batchSize must be a positive integer, not ${batch}`);
  }
  return batch;
}

async function declareCursor(client: pg.ClientBase, options: ReadChainOptions): Promise<void> {
  const upper = options.toSeq === undefined ? '' : ` AND seq <= ${int(options.toSeq)}`;
  const chain = options.chain === undefined ? '' : `chain_id = ${int(options.chain)} AND `;
  // A cursor, so the plan is chosen for reading from the start (a merge of each partition's
  // (chain_id, seq) index) rather than for the whole result (which can be a sort).
  await client.query(
    `DECLARE ${CURSOR} NO SCROLL CURSOR FOR SELECT ${COLUMNS} FROM audit.event_log
      WHERE ${chain}seq >= ${int(options.fromSeq)}${upper} ORDER BY chain_id, seq`,
  );
}

/**
 * Runs the cursor for up to `rows` more rows, handing each to `onRow` as it arrives; resolves
 * to whether the cursor may have more. Every column arrives as PostgreSQL's text: no Date (it
 * would drop the microseconds), no number parsing we would have to undo.
 *
 * This is the extended protocol's Execute on the cursor's portal, not `FETCH n`: PostgreSQL
 * runs a FETCH statement into a tuplestore and sends the rows from there, which tripled the
 * backend's CPU (100,000 events of ~400-byte bodies: 0.5–0.6 s with FETCH 5000, 0.16–0.2 s
 * with Execute), and the backend was what the verifier waited for once it streamed. pg has no
 * API for it, so this is a Submittable, pg's extension point for custom queries: its client
 * calls the handle* methods below as the backend's messages arrive (as it does for pg-cursor).
 */
function executeCursor(
  client: pg.ClientBase,
  rows: number,
  onRow: (row: Row) => void,
): Promise<boolean> {
  return new Promise((resolve, reject) => {
    let more = false;
    const execute: pg.Submittable & Record<string, unknown> = {
      submit(connection: pg.Connection) {
        connection.execute({ portal: CURSOR, rows: String(rows) }, true);
        connection.sync();
      },
      handleDataRow(message: { fields: Row }) {
        onRow(message.fields);
      },
      handlePortalSuspended() {
        more = true;
      },
      handleCommandComplete() {},
      handleEmptyQuery() {},
      handleRowDescription() {},
      handleError(error: Error) {
        reject(error);
      },
      handleReadyForQuery() {
        resolve(more);
      },
    };
    client.query(execute);
  });
}

function eventOf(options: ReadChainOptions): (r: Row) => ChainEvent {
  const legacyUntil = options.legacyUntil ?? 0;
  return (r) => {
    const chain = Number(r[15]);
    const seq = Number(r[0]);
    const e = toEvent(r, seq);
    if (chain !== 0 || seq > legacyUntil) e.chain = chain;
    e.chainId = chain;
    return e;
  };
}

function toEvent(r: Row, seq: number): ChainEvent {
  return {
    seq,
    occurredAt: canonicalTimestamp(r[1]!),
    type: r[2]!,
    prevHash: r[3]!,
    hash: r[4]!,
    body: r[5]!,
    columns: {
      taskId: r[6] ?? null,
      tenant: r[7] ?? null,
      subject: r[8] ?? null,
      client: r[9] ?? null,
      tool: r[10] ?? null,
      reason: r[11] ?? null,
      correlationId: r[12] ?? null,
      actorSubject: r[13] ?? null,
      actorKind: r[14] ?? null,
    },
  };
}

function int(n: number): string {
  if (!Number.isSafeInteger(n)) throw new TypeError(`readChain: not an integer: ${n}`);
  return String(n);
}

/**
 * Whether any event before `seq` is stored, in the caller's snapshot. Archiving removes every
 * event up to a signed boundary, so a starting checkpoint whose event is gone while older
 * ones are stored names a deleted event.
 */
export async function hasEventsBefore(
  client: pg.ClientBase,
  seq: number,
  chain = 0,
): Promise<boolean> {
  if (seq <= 1) return false;
  const rows = await client.query(
    'SELECT 1 FROM audit.event_log WHERE chain_id = $1 AND seq < $2 LIMIT 1',
    [chain, seq],
  );
  return (rows.rowCount ?? 0) > 0;
}

/** A chain as audit.chain_heads records it: its tenant, head and legacy boundary. */
export interface ChainRecord {
  chain: number;
  tenant: string | null;
  headSeq: number;
  headHash: string;
  legacyUntil: number;
}

/**
 * Every chain of the trail, in the caller's snapshot: those audit.chains records, any other
 * chain id events carry (a chain whose row was removed), found by skipping through the
 * (chain_id, seq) indexes rather than reading every event, and any chain the `attested`
 * checkpoints name that nothing records any more (every event and its row gone).
 */
export async function listChains(
  client: pg.ClientBase,
  attested: ReadonlyArray<{ heads: ReadonlyArray<{ chain: number }> }> = [],
): Promise<ChainRecord[]> {
  const recorded = await client.query<{
    chain_id: string;
    tenant: string | null;
    seq: string;
    hash: string;
    legacy_until: string;
  }>('SELECT chain_id, tenant, seq, hash, legacy_until FROM audit.chain_heads ORDER BY chain_id');
  const chains = new Map<number, ChainRecord>(
    recorded.rows.map((r) => [
      Number(r.chain_id),
      {
        chain: Number(r.chain_id),
        tenant: r.tenant,
        headSeq: Number(r.seq),
        headHash: r.hash,
        legacyUntil: Number(r.legacy_until),
      },
    ]),
  );
  const stored = await client.query<{ chain_id: string }>(
    `WITH RECURSIVE c(id) AS (
       (SELECT chain_id FROM audit.event_log ORDER BY chain_id LIMIT 1)
       UNION ALL
       SELECT (SELECT chain_id FROM audit.event_log WHERE chain_id > c.id ORDER BY chain_id LIMIT 1)
         FROM c WHERE c.id IS NOT NULL)
     SELECT id AS chain_id FROM c WHERE id IS NOT NULL`,
  );
  const ids = [
    ...stored.rows.map((r) => Number(r.chain_id)),
    ...attested.flatMap((c) => c.heads.map((h) => h.chain)),
  ];
  for (const id of ids) {
    if (!chains.has(id)) {
      chains.set(id, { chain: id, tenant: null, headSeq: 0, headHash: '', legacyUntil: 0 });
    }
  }
  return [...chains.values()].sort((a, b) => a.chain - b.chain);
}
