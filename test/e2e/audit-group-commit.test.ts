// Appends on a pool share commits (group commit): each caller still gets its own event,
// durable before its promise settles, in one gapless valid chain; a bad event fails alone.
import pg from 'pg';
import { createPool, type Pool } from '@mtg/db';
import { appendAuditGrouped, verifyAuditTrail, type AuditEvent } from '@mtg/audit';
import { sampleEvent } from '../../packages/audit/test/support/events.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { sql } from '../support/sql.ts';

let db: TestDatabase;
let pool: Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  pool = createPool({ connectionString: db.url, role: 'mtg_gateway', max: 4 });
});
afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

test('300 concurrent appends commit in a few transactions, each caller getting its own event', async () => {
  const events = Array.from({ length: 300 }, (_, i) => ({
    ...sampleEvent(i, 'group'),
    correlationId: `group-${i}`,
  }));
  const seqs = await Promise.all(events.map((e) => appendAuditGrouped(pool, e)));

  expect(new Set(seqs).size).toBe(300);
  const rows = await sql<{ seq: string; correlation_id: string; tx: string }>(
    db.url,
    `SELECT seq, correlation_id, xmin::text AS tx FROM audit.events WHERE tenant = 'group'`,
  );
  expect(rows).toHaveLength(300);
  const bySeq = new Map(rows.map((r) => [Number(r.seq), r.correlation_id]));
  // The sequence number each caller got is the event it appended.
  seqs.forEach((seq, i) => expect(bySeq.get(seq)).toBe(`group-${i}`));
  // Far fewer commits than events: the first commits alone, the rest share.
  const commits = new Set(rows.map((r) => r.tx)).size;
  expect(commits).toBeLessThan(10);

  const owner = new pg.Client({ connectionString: db.url });
  await owner.connect();
  try {
    expect(await verifyAuditTrail(owner)).toMatchObject({ ok: true, events: 300 });
  } finally {
    await owner.end();
  }
});

test('an event the database refuses fails its own caller only', async () => {
  const before = await sql<{ n: number }>(db.url, 'SELECT count(*)::int AS n FROM audit.events');
  const good = Array.from({ length: 20 }, (_, i) => ({
    ...sampleEvent(i, 'isolated'),
    correlationId: `ok-${i}`,
  }));
  const bad = { ...good[0]!, type: 'Not A Type' } as unknown as AuditEvent;
  const outcomes = await Promise.allSettled([
    ...good.slice(0, 10).map((e) => appendAuditGrouped(pool, e)),
    appendAuditGrouped(pool, bad),
    ...good.slice(10).map((e) => appendAuditGrouped(pool, e)),
  ]);
  expect(outcomes.filter((o) => o.status === 'rejected')).toHaveLength(1);
  expect(outcomes[10]).toMatchObject({ status: 'rejected', reason: { code: '23514' } });
  const after = await sql<{ n: number }>(db.url, 'SELECT count(*)::int AS n FROM audit.events');
  expect(after[0]!.n - before[0]!.n).toBe(20);
});
