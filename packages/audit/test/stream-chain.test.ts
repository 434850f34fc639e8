// Reading the chain against real PostgreSQL: audit:verify streams it row by row
// (streamChain()), audit:checkpoint reads it in batches (readChain()), both through Execute on
// a cursor; each must report what a plain SELECT of every row does, wherever the batch
// boundaries fall.
import pg from 'pg';
import {
  canonicalTimestamp,
  createChainVerifier,
  readChain,
  readChainSession,
  verifyAuditTrail,
  type ChainFailure,
} from '../src/index.ts';
import { streamChain } from '../src/chain/read-chain.ts';
import { appendSamples, tamper } from './support/events.ts';
import { cloneDatabase } from './support/template-database.ts';
import { createTestDatabase, type TestDatabase } from '../../../test/support/database.ts';

const EVENTS = 23;
let template: TestDatabase;

beforeAll(async () => {
  template = await createTestDatabase();
  await appendSamples(template.url, EVENTS);
});

afterAll(async () => {
  await template?.drop();
});

async function withAuditor<T>(url: string, run: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, options: '-c role=mtg_auditor' });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

/** A verification read independently: every row in one plain SELECT, pushed in order. */
async function verifyAllAtOnce(client: pg.Client) {
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  try {
    await readChainSession(client);
    const { rows } = await client.query<(string | null)[]>({
      text: `SELECT seq, occurred_at, type, prev_hash, hash, body, task_id, tenant, subject,
               client, tool, reason, correlation_id, actor_subject, actor_kind, chain_id
               FROM audit.event_log ORDER BY chain_id, seq`,
      rowMode: 'array',
      types: { getTypeParser: () => (value: string) => value },
    });
    const chain = createChainVerifier();
    let failure: ChainFailure | undefined;
    for (const r of rows) {
      failure = chain.push({
        // Every sample is of one tenant, so of one chain, all written after migration 080.
        chain: Number(r[15]),
        chainId: Number(r[15]),
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
      });
      if (failure) break;
    }
    failure ??= chain.finish();
    return { failure, events: chain.stats.events };
  } finally {
    await client.query('ROLLBACK');
  }
}

/** The same through readChain(), a batch at a time (what audit:checkpoint does). */
async function verifyInBatches(client: pg.Client, batchSize: number) {
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  try {
    await readChainSession(client);
    const chain = createChainVerifier();
    let failure: ChainFailure | undefined;
    read: for await (const batch of readChain(client, { fromSeq: 1, batchSize })) {
      for (const event of batch) {
        failure = chain.push(event);
        if (failure) break read;
      }
    }
    failure ??= chain.finish();
    return { failure, events: chain.stats.events };
  } finally {
    await client.query('ROLLBACK');
  }
}

// Each damage with the failure it is named as. A body edit is decided only at the next
// event (which can show the edited one was inserted instead), so batch boundaries between
// the two are what batch sizes 1, 2 and 5 exercise.
const damage: [string, string[], ChainFailure['code'] | undefined][] = [
  ['nothing', [], undefined],
  [
    'a body edited',
    [`UPDATE audit.events SET body = replace(body, '"data":{', '"data":{"x":1,') WHERE seq = 6`],
    'modified',
  ],
  [
    'a query column changed',
    [`UPDATE audit.events SET tenant = 'globex' WHERE seq = 9`],
    'modified',
  ],
  ['an event deleted', ['DELETE FROM audit.events WHERE seq = 12'], 'missing'],
  ['the first event deleted', ['DELETE FROM audit.events WHERE seq = 1'], 'missing'],
  [
    'an event inserted with the later ones renumbered',
    [
      `UPDATE audit.events SET seq = seq + 1000 WHERE seq >= 8`,
      `UPDATE audit.events SET seq = seq - 999 WHERE seq >= 1000`,
      `INSERT INTO audit.events (chain_id, seq, occurred_at, type, body, prev_hash, hash, subject)
         SELECT chain_id, 8, occurred_at, 'task.created', '{"subject":"mallory"}', hash,
                audit.event_hash(chain_id, 8, occurred_at, 'task.created', hash, '{"subject":"mallory"}'),
                'mallory'
           FROM audit.events WHERE seq = 7`,
    ],
    'inserted',
  ],
  [
    'two events swapped',
    [
      `UPDATE audit.events SET seq = seq + 1000 WHERE seq IN (14, 15)`,
      `UPDATE audit.events SET seq = CASE seq WHEN 1014 THEN 15 ELSE 14 END WHERE seq > 1000`,
    ],
    'reordered',
  ],
];

test.each(damage)(
  'with %s, the chain read in batches or streamed reports what one plain SELECT does, whatever the batch size',
  async (_name, statements, code) => {
    const copy = await cloneDatabase(template.name);
    try {
      if (statements.length > 0) await tamper(copy.url, statements);
      await withAuditor(copy.url, async (client) => {
        const reference = await verifyAllAtOnce(client);
        expect(reference.failure?.code).toBe(code);
        for (const batchSize of [1, 2, 5, EVENTS, 5000]) {
          expect(await verifyInBatches(client, batchSize)).toEqual(reference);
          const report = await verifyAuditTrail(client, { batchSize });
          // The trail's report also names the chain: the samples' tenant's.
          expect({ failure: report.failure, events: report.events }).toEqual(
            reference.failure
              ? { ...reference, failure: { ...reference.failure, chain: 1, tenant: 'acme' } }
              : reference,
          );
          expect(report.ok).toBe(reference.failure === undefined);
        }
      });
    } finally {
      await copy.drop();
    }
  },
);

test('a consumer that stops ends the stream early and leaves the transaction usable', async () => {
  await withAuditor(template.url, async (client) => {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    await readChainSession(client);
    const seen: number[] = [];
    await streamChain(client, { fromSeq: 1, batchSize: 4 }, (e) => {
      seen.push(e.seq);
      return e.seq < 6;
    });
    expect(seen).toEqual([1, 2, 3, 4, 5, 6]);
    // The cursor was closed: the same name can be declared again.
    const again: number[] = [];
    await streamChain(client, { fromSeq: 20, batchSize: 4 }, (e) => again.push(e.seq) > 0);
    expect(again).toEqual([20, 21, 22, 23]);
    await client.query('COMMIT');
  });
});

test('an exception in the consumer fails the stream with it, and the connection carries on', async () => {
  await withAuditor(template.url, async (client) => {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    await readChainSession(client);
    const bug = new Error('consumer bug');
    let calls = 0;
    await expect(
      streamChain(client, { fromSeq: 1, batchSize: 5 }, (e) => {
        calls++;
        if (e.seq === 3) throw bug;
        return true;
      }),
    ).rejects.toBe(bug);
    // Nothing after the failing row was handed over.
    expect(calls).toBe(3);
    await client.query('ROLLBACK');
    expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });
});

test('after the consumer stops, the rest of that batch is still read and the later batches are not', async () => {
  // An event PostgreSQL prints as 'infinity' cannot be converted (the reader throws), as
  // readChain() threw for it whenever it was in a batch that got read at all.
  const copy = await cloneDatabase(template.name);
  try {
    await tamper(copy.url, [
      'CREATE TABLE audit.events_default PARTITION OF audit.events DEFAULT',
      `INSERT INTO audit.events (chain_id, seq, occurred_at, type, body, prev_hash, hash)
         VALUES (1, 30, 'infinity', 'task.created', '{}', repeat('0', 64), repeat('0', 64))`,
    ]);
    await withAuditor(copy.url, async (client) => {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      await readChainSession(client);
      // Batches of 4 from event 1: …, [17..20], [21, 22, 23, 30].
      const stopAt = (seq: number) =>
        streamChain(client, { fromSeq: 1, batchSize: 4 }, (e) => e.seq < seq);
      await expect(stopAt(20)).resolves.toBeUndefined();
      await expect(stopAt(22)).rejects.toThrow(/not a UTC ISO timestamp: infinity/);
      await client.query('ROLLBACK');
    });
  } finally {
    await copy.drop();
  }
});
