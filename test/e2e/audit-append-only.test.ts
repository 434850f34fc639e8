// The database itself keeps the audit trail append-only: privileges for the application
// roles, triggers for everyone else, audit.append() as the only way in.
import pg from 'pg';
import { appendAuditInTransaction, eventHash, canonicalTimestamp } from '@mtg/audit';
import { appendSamples } from '../../packages/audit/test/support/events.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

let db: TestDatabase;
let client: pg.Client;
let partition: string;

beforeAll(async () => {
  db = await createTestDatabase();
  await appendSamples(db.url, 5);
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
  partition = (await client.query(`SELECT tableoid::regclass::text AS p FROM audit.events LIMIT 1`))
    .rows[0].p;
});

afterAll(async () => {
  await client?.end();
  await db?.drop();
});

/** Runs `fn` under `role` (SET ROLE on the superuser's connection), then resets. */
async function as<T>(role: string, fn: () => Promise<T>): Promise<T> {
  await client.query(`SET ROLE ${role}`);
  try {
    return await fn();
  } finally {
    await client.query('RESET ROLE');
  }
}

const APP_ROLES = [
  'mtg_gateway',
  'mtg_worker',
  'mtg_auditor',
  'mtg_audit_signer',
  'mtg_downstream',
];

test.each(APP_ROLES)(
  '%s cannot UPDATE, DELETE, TRUNCATE or INSERT audit events, nor touch a partition directly',
  async (role) => {
    await as(role, async () => {
      for (const table of ['audit.events', partition]) {
        for (const statement of [
          `UPDATE ${table} SET type = type`,
          `DELETE FROM ${table}`,
          `TRUNCATE ${table}`,
          `INSERT INTO ${table} (seq, occurred_at, type, body, prev_hash, hash) VALUES (99, now(), 'task.created', '{}', repeat('0', 64), repeat('0', 64))`,
        ]) {
          await expect(client.query(statement)).rejects.toMatchObject({ code: '42501' });
        }
      }
    });
  },
);

test.each(APP_ROLES)('%s cannot change or remove signed checkpoints', async (role) => {
  await as(role, async () => {
    for (const statement of [
      'UPDATE audit.checkpoints SET seq = seq',
      'DELETE FROM audit.checkpoints',
      'TRUNCATE audit.checkpoints',
      `INSERT INTO audit.checkpoints (seq, hash, signed_at, key_id, jws) VALUES (1, repeat('0', 64), now(), 'k', 'x')`,
    ]) {
      await expect(client.query(statement)).rejects.toMatchObject({ code: '42501' });
    }
  });
});

test.each(APP_ROLES)('%s cannot move, remove or add a chain head (audit.chains)', async (role) => {
  await as(role, async () => {
    for (const statement of [
      'UPDATE audit.chains SET head_seq = head_seq + 1',
      'DELETE FROM audit.chains',
      'TRUNCATE audit.chains',
      `INSERT INTO audit.chains (chain_id, tenant) VALUES (99, 'mallory')`,
    ]) {
      await expect(client.query(statement)).rejects.toMatchObject({ code: '42501' });
    }
  });
});

test('even the owner cannot move a chain head back, give a chain to another tenant, or remove one', async () => {
  for (const statement of [
    `UPDATE audit.chains SET head_seq = 1 WHERE tenant = 'acme'`,
    `UPDATE audit.chains SET tenant = 'globex', head_seq = head_seq + 1 WHERE tenant = 'acme'`,
    `UPDATE audit.chains SET legacy_until = 3, head_seq = head_seq + 1 WHERE chain_id = 0`,
    `DELETE FROM audit.chains WHERE tenant = 'acme'`,
  ]) {
    await expect(client.query(statement)).rejects.toThrow(
      /only append_many\(\) moves a chain head forward/,
    );
  }
  await expect(client.query('TRUNCATE audit.chains')).rejects.toThrow(/append-only/);
});

test('the application roles can only append; the auditor and the signer cannot append at all', async () => {
  for (const role of ['mtg_gateway', 'mtg_worker']) {
    const seq = await as(role, () =>
      appendAuditInTransaction(client, {
        type: 'task.status_read',
        tenant: 'acme',
        subject: 'nia',
      }),
    );
    expect(seq).toBeGreaterThan(5);
  }
  for (const role of ['mtg_auditor', 'mtg_audit_signer', 'mtg_downstream']) {
    await as(role, async () => {
      await expect(client.query(`SELECT audit.append('task.created', '{}')`)).rejects.toMatchObject(
        { code: '42501' },
      );
    });
  }
});

test('the auditor reads the views but not the tables', async () => {
  await as('mtg_auditor', async () => {
    for (const table of ['audit.events', partition, 'audit.checkpoints', 'audit.chains']) {
      await expect(client.query(`SELECT 1 FROM ${table} LIMIT 1`)).rejects.toMatchObject({
        code: '42501',
      });
    }
    for (const view of [
      'event_log',
      'chain_head',
      'chain_heads',
      'checkpoint_log',
      'task_timeline',
      'denials',
      'identity_changes',
      'principal_activity',
    ]) {
      await expect(client.query(`SELECT * FROM audit.${view} LIMIT 1`)).resolves.toBeDefined();
    }
    for (const statement of [
      `UPDATE audit.event_log SET type = type`,
      `DELETE FROM audit.denials`,
    ]) {
      await expect(client.query(statement)).rejects.toMatchObject({ code: '42501' });
    }
  });
});

test('even the owner is refused UPDATE, DELETE and TRUNCATE by the triggers, on the table and on each partition', async () => {
  for (const table of ['audit.events', partition]) {
    await expect(client.query(`UPDATE ${table} SET type = type`)).rejects.toThrow(
      /append-only \(UPDATE refused\)/,
    );
    await expect(client.query(`DELETE FROM ${table}`)).rejects.toThrow(
      /append-only \(DELETE refused\)/,
    );
    await expect(client.query(`TRUNCATE ${table}`)).rejects.toThrow(
      /append-only \(TRUNCATE refused\)/,
    );
  }
  await expect(client.query('DELETE FROM audit.checkpoints')).resolves.toBeDefined(); // no rows yet: nothing fires
  await expect(client.query('TRUNCATE audit.checkpoints')).rejects.toThrow(/append-only/);
});

test('append() refuses a body that is not a JSON object, an ill-formed type, and a REPEATABLE READ transaction', async () => {
  await as('mtg_gateway', async () => {
    await expect(client.query(`SELECT audit.append('task.created', '[1]')`)).rejects.toThrow(
      /must be a JSON object/,
    );
    await expect(
      client.query(`SELECT audit.append('task.created', 'not json')`),
    ).rejects.toMatchObject({ code: '22P02' });
    await expect(
      client.query(`SELECT audit.append(E'task\\ncreated', '{}')`),
    ).rejects.toMatchObject({ code: '23514' });
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await expect(client.query(`SELECT audit.append('task.created', '{}')`)).rejects.toThrow(
      /READ COMMITTED/,
    );
    await client.query('ROLLBACK');
  });
});

test('each appended event carries the hash of the one before in its chain and a hash anyone can recompute', async () => {
  await client.query(`SET TimeZone = 'UTC'`);
  const { rows: events } = await client.query({
    text: `SELECT chain_id, seq, occurred_at, type, prev_hash, hash, body FROM audit.events
            WHERE chain_id = (SELECT chain_id FROM audit.chains WHERE tenant = 'acme') ORDER BY seq`,
    types: { getTypeParser: () => (v: string) => v },
  });
  expect(events.length).toBeGreaterThanOrEqual(5);
  expect(events.map((e) => Number(e.seq))).toEqual(events.map((_, i) => i + 1));
  events.forEach((e, i) => {
    expect(e.prev_hash).toBe(i === 0 ? '0'.repeat(64) : events[i - 1].hash);
    const recomputed = eventHash({
      chain: Number(e.chain_id),
      seq: Number(e.seq),
      occurredAt: canonicalTimestamp(e.occurred_at),
      type: e.type,
      prevHash: e.prev_hash,
      body: e.body,
    });
    expect(recomputed).toBe(e.hash);
  });
});

test('occurred_at never goes back along a chain, so each month holds one run of each chain', async () => {
  const { rows } = await client.query(
    `SELECT count(*)::int AS n FROM (
       SELECT occurred_at < lag(occurred_at) OVER (PARTITION BY chain_id ORDER BY seq) AS back
         FROM audit.events) x WHERE back`,
  );
  expect(rows[0].n).toBe(0);
});
