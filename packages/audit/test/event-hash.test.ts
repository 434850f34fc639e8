import pg from 'pg';
import {
  canonicalJson,
  canonicalTimestamp,
  eventHash,
  GENESIS_HASH,
  hashInput,
} from '../src/index.ts';
import { createTestDatabase, type TestDatabase } from '../../../test/support/database.ts';

// The worked example of docs/audit.md, "The hash chain": keep them in step.
const first = {
  seq: 1,
  occurredAt: '2026-11-29T19:41:28.123400Z',
  type: 'task.created',
  prevHash: GENESIS_HASH,
  body: canonicalJson({
    taskId: '5d41402abc4b2a76b9719d911017c592',
    tenant: 'acme',
    subject: 'nia',
    client: 'mcp-agent',
    tool: 'generate_report',
    correlationId: 'c-7',
    actor: { subject: 'nia', kind: 'user' },
    data: { wire: 'v2', arguments: { report: 'Q3 – Zoë' } },
  }),
};
const FIRST_HASH = '725d5ce0af6e627cd68877ddbaee0846c958965443b0dc670964517591763eb6';
const second = {
  seq: 2,
  occurredAt: '2026-11-29T19:41:32.333000Z',
  type: 'task.completed',
  prevHash: FIRST_HASH,
  body: canonicalJson({
    taskId: '5d41402abc4b2a76b9719d911017c592',
    tenant: 'acme',
    subject: 'nia',
    client: 'mcp-agent',
    tool: 'generate_report',
    reason: 'success',
    actor: { subject: 'worker-1', kind: 'worker' },
    data: { outcome: 'success', durationMs: 4210 },
  }),
};

test('the documented worked example hashes to the documented values', () => {
  expect(first.body).toBe(
    '{"actor":{"kind":"user","subject":"nia"},"client":"mcp-agent","correlationId":"c-7","data":{"arguments":{"report":"Q3 – Zoë"},"wire":"v2"},"subject":"nia","taskId":"5d41402abc4b2a76b9719d911017c592","tenant":"acme","tool":"generate_report"}',
  );
  expect(hashInput(first)).toBe(
    `1\n2026-11-29T19:41:28.123400Z\ntask.created\n${'0'.repeat(64)}\n${first.body}`,
  );
  expect(Buffer.byteLength(hashInput(first), 'utf8')).toBe(351);
  expect(eventHash(first)).toBe(FIRST_HASH);
  expect(eventHash(second)).toBe(
    '15771ffec984860d633823ba5f0affa1e060657544ffe0f89308ab7d8eea5086',
  );
});

test('the same event as event 1 of chain 1 hashes with the chain line in front, to the documented value', () => {
  const inChain = { ...first, chain: 1 };
  expect(hashInput(inChain)).toBe(`1\n${hashInput(first)}`);
  expect(Buffer.byteLength(hashInput(inChain), 'utf8')).toBe(353);
  expect(eventHash(inChain)).toBe(
    '964ded73752bb704afe2b94cfd488f3bc3614d79b24ddd829a1850a88488fb9c',
  );
  // Another chain, another hash: an event cannot be moved between chains.
  expect(eventHash({ ...first, chain: 2 })).not.toBe(eventHash(inChain));
  expect(eventHash({ ...first, chain: 0 })).not.toBe(FIRST_HASH);
});

test('PostgreSQL’s UTC text form becomes the canonical timestamp, always six fractional digits', () => {
  expect(canonicalTimestamp('2026-11-29 19:41:28.1234+00')).toBe('2026-11-29T19:41:28.123400Z');
  expect(canonicalTimestamp('2026-11-29 19:41:28+00')).toBe('2026-11-29T19:41:28.000000Z');
  expect(canonicalTimestamp('2026-11-29 19:41:28.000001+00')).toBe('2026-11-29T19:41:28.000001Z');
  expect(() => canonicalTimestamp('2026-11-29 19:41:28+01')).toThrow(TypeError);
});

describe('the database computes the same hash', () => {
  let db: TestDatabase;
  let client: pg.Client;
  beforeAll(async () => {
    db = await createTestDatabase();
    client = new pg.Client({ connectionString: db.url });
    await client.connect();
  });
  afterAll(async () => {
    await client?.end();
    await db?.drop();
  });

  test.each([
    ['the worked example', first],
    ['its successor', second],
    [
      'a body with escapes and astral characters',
      {
        ...first,
        seq: 987654321,
        occurredAt: '2026-01-01T00:00:00.000000Z',
        body: canonicalJson({ s: 'a\u0000b\n"😀"\\', e: 'ünïcødé' }),
      },
    ],
  ])('audit.event_hash() agrees with eventHash() for %s', async (_name, e) => {
    const { rows } = await client.query('SELECT audit.event_hash($1, $2, $3, $4, $5) AS h', [
      e.seq,
      e.occurredAt,
      e.type,
      e.prevHash,
      e.body,
    ]);
    expect(rows[0].h).toBe(eventHash(e));
    // The form with the chain (every event since migration 080), on chains 0 and 7.
    for (const chain of [0, 7]) {
      const withChain = await client.query(
        'SELECT audit.event_hash($1::bigint, $2::bigint, $3, $4, $5, $6) AS h',
        [chain, e.seq, e.occurredAt, e.type, e.prevHash, e.body],
      );
      expect(withChain.rows[0].h).toBe(eventHash({ ...e, chain }));
    }
  });

  test('a session time zone other than UTC does not change the hash', async () => {
    await client.query(`SET TimeZone = 'America/New_York'`);
    const { rows } = await client.query('SELECT audit.event_hash($1, $2, $3, $4, $5) AS h', [
      first.seq,
      first.occurredAt,
      first.type,
      first.prevHash,
      first.body,
    ]);
    expect(rows[0].h).toBe(FIRST_HASH);
  });
});
