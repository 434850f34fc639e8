// A grouped audit append whose connection breaks after the statement reached the server,
// before its answer (the group committed, and the writer does not know it): the retry of
// each event finds the event its key names instead of chaining a second copy, every caller
// gets the seq of its one event, and the chain verifies. The relay between the pool and
// PostgreSQL lets the statement through and cuts the pool's side before the answer.
import pg from 'pg';
import { createPool, type Pool } from '@mtg/db';
import { appendAuditGrouped, verifyAuditTrail } from '@mtg/audit';
import { sampleEvent } from '../../packages/audit/test/support/events.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { sql } from '../support/sql.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';

// The statement texts the cuts wait for (packages/audit/src/group-commit.ts).
const GROUP = 'audit.append_many($1::text[], $2::text[], $3::uuid[], $4)';
const ONE = 'audit.append_many(ARRAY[$1::text], ARRAY[$2::text], ARRAY[$3::uuid], $4)';

let db: TestDatabase;
let proxy: TcpProxy;
let pool: Pool;

beforeAll(async () => {
  db = await createTestDatabase();
  const u = new URL(db.url);
  proxy = await startTcpProxy({ host: u.hostname, port: Number(u.port || 5432) });
  pool = createPool({ connectionString: proxy.via(db.url), role: 'mtg_gateway', max: 4 });
});
afterAll(async () => {
  await pool?.end();
  await proxy?.close();
  await db?.drop();
});

const verify = async () => {
  const owner = new pg.Client({ connectionString: db.url });
  await owner.connect();
  try {
    return await verifyAuditTrail(owner);
  } finally {
    await owner.end();
  }
};

const eventsOf = (tenant: string) =>
  sql<{ seq: string; correlation_id: string; tx: string }>(
    db.url,
    `SELECT seq, correlation_id, xmin::text AS tx FROM audit.events WHERE tenant = $1`,
    [tenant],
  );

test('a group whose commit outcome is unknown: each event once in the chain, each caller its own seq', async () => {
  const events = Array.from({ length: 40 }, (_, i) => ({
    ...sampleEvent(i, 'cut-group'),
    correlationId: `cut-${i}`,
  }));
  const cut = proxy.cutAtCommitOf(GROUP);
  // The first commits alone; those appended meanwhile go in groups, the first group's answer
  // is cut.
  const seqs = await Promise.all(events.map((e) => appendAuditGrouped(pool, e)));
  await cut;

  const rows = await eventsOf('cut-group');
  expect(rows).toHaveLength(40);
  expect(new Set(seqs).size).toBe(40);
  const bySeq = new Map(rows.map((r) => [Number(r.seq), r.correlation_id]));
  seqs.forEach((seq, i) => expect(bySeq.get(seq)).toBe(`cut-${i}`));
  // Groups did commit (events sharing one transaction), and no event is there twice.
  const txs = new Map<string, number>();
  for (const r of rows) txs.set(r.tx, (txs.get(r.tx) ?? 0) + 1);
  expect(Math.max(...txs.values())).toBeGreaterThan(1);
  expect(new Set(rows.map((r) => r.correlation_id)).size).toBe(40);
  expect(await verify()).toMatchObject({ ok: true });
});

test('a lone append whose commit outcome is unknown is tried again and stored once', async () => {
  const cut = proxy.cutAtCommitOf(ONE);
  const seq = await appendAuditGrouped(pool, {
    ...sampleEvent(0, 'cut-one'),
    correlationId: 'cut-one-0',
  });
  await cut;
  const rows = await eventsOf('cut-one');
  expect(rows.map((r) => [Number(r.seq), r.correlation_id])).toEqual([[seq, 'cut-one-0']]);
  expect(await verify()).toMatchObject({ ok: true });
});

test('an event key is not reused: the same event appended twice by its caller is two events', async () => {
  const e = { ...sampleEvent(1, 'cut-twice'), correlationId: 'twice' };
  const [a, b] = [await appendAuditGrouped(pool, e), await appendAuditGrouped(pool, e)];
  expect(a).not.toBe(b);
  expect(await eventsOf('cut-twice')).toHaveLength(2);
});
