// Monthly partitions of audit.events: the chain runs across them, append() creates a
// missing month itself, and a closed month can be archived and detached while the rest of
// the chain stays verifiable from the boundary checkpoint.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { appendAuditInTransaction } from '@mtg/audit';
import { appendSamples } from '../../packages/audit/test/support/events.ts';
import { checkpointScript, verifyScript } from '../../packages/audit/test/support/run-script.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { sql } from '../support/sql.ts';

let dataDir: string;
beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'mtg-audit-partitions-'));
});
afterAll(async () => {
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

/**
 * History the test cannot wait for: events of tenant acme dated in past months, chained
 * exactly as append() chains them (its chain, same hash function, same columns, the head
 * moved along), written as the owner.
 */
async function appendAt(url: string, at: string, count: number): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(
      `INSERT INTO audit.chains (chain_id, tenant) SELECT nextval('audit.chain_ids'), 'acme'
        WHERE NOT EXISTS (SELECT 1 FROM audit.chains WHERE tenant = 'acme')`,
    );
    for (let i = 0; i < count; i++) {
      const body = JSON.stringify({ data: { n: i }, subject: 'nia', tenant: 'acme' });
      await client.query(
        `WITH c AS (SELECT chain_id, head_seq + 1 AS seq, head_hash AS prev,
                           $1::timestamptz + make_interval(secs => $3::int) AS at
                      FROM audit.chains WHERE tenant = 'acme'),
              e AS (INSERT INTO audit.events (chain_id, seq, occurred_at, type, body, prev_hash, hash, tenant, subject)
                    SELECT chain_id, seq, at, 'task.status_read', $2, prev,
                           audit.event_hash(chain_id, seq, at, 'task.status_read', prev, $2), 'acme', 'nia'
                      FROM c RETURNING chain_id, seq, hash, occurred_at)
         UPDATE audit.chains h SET head_seq = e.seq, head_hash = e.hash, head_at = e.occurred_at
           FROM e WHERE h.chain_id = e.chain_id`,
        [at, body, i],
      );
    }
  } finally {
    await client.end();
  }
}

describe('a chain across months', () => {
  let db: TestDatabase;
  const env = () => ({ DATABASE_URL: db.url, DATA_DIR: dataDir });

  beforeAll(async () => {
    db = await createTestDatabase();
    await sql(
      db.url,
      `SELECT audit.ensure_partition(m) FROM unnest(ARRAY['2026-08-15Z', '2026-09-15Z', '2026-10-15Z']::timestamptz[]) m`,
    );
    await appendAt(db.url, '2026-08-20T10:00:00Z', 4); // events 1..4
    await appendAt(db.url, '2026-09-20T10:00:00Z', 4); // 5..8
    await appendAt(db.url, '2026-10-20T10:00:00Z', 4); // 9..12
    await appendSamples(db.url, 3); // 13..15, now, through audit.append
  });
  afterAll(async () => {
    await db?.drop();
  });

  test('append() continues the chain from the newest month, and audit:verify walks every partition', async () => {
    const rows = await sql(
      db.url,
      `SELECT seq::int, tableoid::regclass::text AS p FROM audit.events ORDER BY seq`,
    );
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 15 }, (_, i) => i + 1));
    expect(rows[0].p).toBe('audit.events_2026_08');
    expect(rows[12].p).not.toBe('audit.events_2026_10');
    const result = await verifyScript([], env());
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /^audit chain 1 \(tenant "acme"\) intact: 15 events \(seq 1\.\.15\)/,
    );
  });

  test('the auditor sees each month with the chain values at its edges', async () => {
    const client = new pg.Client({ connectionString: db.url, options: '-c role=mtg_auditor' });
    await client.connect();
    try {
      const { rows } = await client.query(
        `SELECT partition, first_seq::int, last_seq::int, first_prev_hash, last_hash FROM audit.partition_bounds() WHERE first_seq IS NOT NULL`,
      );
      expect(rows.slice(0, 3).map((r) => [r.partition, r.first_seq, r.last_seq])).toEqual([
        ['events_2026_08', 1, 4],
        ['events_2026_09', 5, 8],
        ['events_2026_10', 9, 12],
      ]);
      expect(rows[0].first_prev_hash).toBe('0'.repeat(64));
      expect(rows[1].first_prev_hash).toBe(rows[0].last_hash);
      expect(rows[2].first_prev_hash).toBe(rows[1].last_hash);
    } finally {
      await client.end();
    }
  });

  test('finding the newest event does not sort: partitions are scanned newest first', async () => {
    const plan = await sql(
      db.url,
      `EXPLAIN SELECT seq, hash FROM audit.events ORDER BY occurred_at DESC, seq DESC LIMIT 1`,
    );
    const text = plan.map((r) => r['QUERY PLAN']).join('\n');
    expect(text).toMatch(/Limit/);
    expect(text).not.toMatch(/Sort/);
  });

  test('a closed month is detached only oldest first, and only once a checkpoint covers its last event', async () => {
    await expect(sql(db.url, `SELECT audit.detach_month('2026-09-01')`)).rejects.toThrow(
      /detach events_2026_08 first/,
    );
    await expect(sql(db.url, `SELECT audit.detach_month('2026-08-01')`)).rejects.toThrow(
      /no checkpoint covers the last event of events_2026_08 in chain 1 \(seq 4\)/,
    );
    const now = (
      await sql(db.url, `SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-01') AS m`)
    )[0].m;
    await expect(sql(db.url, `SELECT audit.detach_month($1)`, [now])).rejects.toThrow(
      /is not closed/,
    );
    // The application roles cannot archive anything.
    const client = new pg.Client({ connectionString: db.url, options: '-c role=mtg_worker' });
    await client.connect();
    await expect(client.query(`SELECT audit.detach_month('2026-08-01')`)).rejects.toMatchObject({
      code: '42501',
    });
    await client.end();
  });

  test('after archiving August, the chain verifies from the boundary checkpoint, and only from there', async () => {
    // Every chain's last event before September: acme's event 4.
    const boundary = await checkpointScript(['--before', '2026-09-01T00:00:00Z'], env());
    expect(boundary.code).toBe(0);
    const signed = JSON.parse(boundary.stdout).heads[0];
    expect(signed).toMatchObject({ chain: 1, seq: 4 });

    await sql(db.url, `SELECT audit.detach_month('2026-08-01')`);
    // The detached month is a table of its own, to export with its boundary checkpoint.
    const archived = await sql(
      db.url,
      `SELECT seq::int, hash FROM audit.events_2026_08 ORDER BY seq`,
    );
    expect(archived.map((r) => r.seq)).toEqual([1, 2, 3, 4]);
    expect(archived[3].hash).toBe(signed.hash);
    await sql(db.url, 'DROP TABLE audit.events_2026_08');

    const whole = await verifyScript([], env());
    expect(whole.code).toBe(1);
    expect(whole.stdout).toMatch(
      /^audit chain BROKEN at event 1 \(missing\) in chain 1 \(tenant "acme"\): events 1\.\.4 are missing: the chain goes from its start to event 5 \(archived\? verify from the boundary checkpoint with --from-checkpoint\)/,
    );

    const fromBoundary = await verifyScript(['--from-checkpoint', '4'], env());
    expect(fromBoundary.code).toBe(0);
    expect(fromBoundary.stdout).toMatch(
      /^audit chain 1 \(tenant "acme"\) intact: 11 events \(seq 5\.\.15\), from the checkpoint at event 4/,
    );
  });
});

test('append() creates the month it needs when nobody created it in advance', async () => {
  const db = await createTestDatabase();
  try {
    // A fresh database without its pre-created (empty) partitions.
    const parts = await sql(
      db.url,
      `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'audit.events'::regclass`,
    );
    for (const p of parts) await sql(db.url, `DROP TABLE audit.${p.relname}`);

    const client = new pg.Client({ connectionString: db.url, options: '-c role=mtg_gateway' });
    await client.connect();
    try {
      expect(
        await appendAuditInTransaction(client, {
          type: 'task.status_read',
          tenant: 'acme',
          subject: 'nia',
        }),
      ).toBe(1);
      expect(
        await appendAuditInTransaction(client, {
          type: 'task.status_read',
          tenant: 'acme',
          subject: 'nia',
        }),
      ).toBe(2);
      const name = (
        await sql(db.url, `SELECT tableoid::regclass::text AS p FROM audit.events LIMIT 1`)
      )[0].p;
      expect(name).toMatch(/^audit\.events_\d{4}_\d{2}$/);
      // Born with the same protections as the others.
      await expect(client.query(`SELECT * FROM ${name}`)).rejects.toMatchObject({ code: '42501' });
      await expect(sql(db.url, `TRUNCATE ${name}`)).rejects.toThrow(/append-only/);
      await expect(sql(db.url, `UPDATE ${name} SET type = type`)).rejects.toThrow(/append-only/);
      await expect(
        sql(db.url, `INSERT INTO ${name} SELECT * FROM ${name} WHERE seq = 1`),
      ).rejects.toMatchObject({ code: '23505' });
    } finally {
      await client.end();
    }
  } finally {
    await db.drop();
  }
});
