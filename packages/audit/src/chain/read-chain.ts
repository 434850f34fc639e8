import type pg from 'pg';
import type { ChainEvent } from './chain-verifier.ts';
import { canonicalTimestamp } from './event-hash.ts';

// Every column as PostgreSQL's text: no Date (it would drop the microseconds), no number
// parsing we would have to undo.
const RAW_TEXT = { getTypeParser: () => (value: string) => value };

const COLUMNS = `seq, occurred_at, type, prev_hash, hash, body, task_id, tenant, subject, client,
  tool, reason, correlation_id, actor_subject, actor_kind`;

export interface ReadChainOptions {
  /** First sequence number to read (inclusive). */
  fromSeq: number;
  /** Last sequence number to read (inclusive); default: to the end. */
  toSeq?: number;
  /** Rows per FETCH. */
  batchSize?: number;
}

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
  const batch = options.batchSize ?? 5000;
  const upper = options.toSeq === undefined ? '' : ` AND seq <= ${int(options.toSeq)}`;
  await client.query(
    `DECLARE audit_chain NO SCROLL CURSOR FOR SELECT ${COLUMNS} FROM audit.event_log
      WHERE seq >= ${int(options.fromSeq)}${upper} ORDER BY seq`,
  );
  const fetch = () => {
    const p = client.query<(string | null)[]>({
      text: `FETCH ${batch} FROM audit_chain`,
      rowMode: 'array',
      types: RAW_TEXT,
    });
    // Handled where it is awaited; this keeps a failure during a yield from counting as
    // an unhandled rejection.
    p.catch(() => {});
    return p;
  };
  // One FETCH in flight while the previous batch is checked.
  let next = fetch();
  try {
    for (;;) {
      const result = await next;
      if (result.rows.length === 0) break;
      next = fetch();
      yield result.rows.map(toEvent);
    }
  } finally {
    // A consumer that stops early leaves a FETCH in flight: let it settle first.
    await next.catch(() => {});
    await client.query('CLOSE audit_chain').catch(() => {});
  }
}

/** Session settings readChain() relies on, for the current transaction. */
export async function readChainSession(client: pg.ClientBase): Promise<void> {
  await client.query(`SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO'`);
}

function toEvent(r: (string | null)[]): ChainEvent {
  return {
    seq: Number(r[0]),
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
