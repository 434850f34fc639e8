// The archival job (npm run audit:archive): signs the head, then for each closed month
// signs its last event, exports it with its boundary checkpoints, verifies the export and
// only then detaches the partition; `audit:verify --archive FILE` verifies a month file
// without a database and names what is wrong with a tampered one.
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { appendSamples } from '../../packages/audit/test/support/events.ts';
import { runScript } from '../../packages/audit/test/support/run-script.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { sql } from '../support/sql.ts';

const archive = (args: string[], env: Record<string, string>) =>
  runScript('scripts/audit-archive.ts', args, env);
const verify = (args: string[], env: Record<string, string>) =>
  runScript('scripts/audit-verify.ts', args, env);

/**
 * History the test cannot wait for: events of tenant acme dated in past months, chained
 * exactly as append() chains them (its chain, same hash function, same columns, the head
 * moved along), written as the owner.
 */
async function appendAt(url: string, at: string, count: number, tenant = 'acme'): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(
      `INSERT INTO audit.chains (chain_id, tenant) SELECT nextval('audit.chain_ids'), $1
        WHERE NOT EXISTS (SELECT 1 FROM audit.chains WHERE tenant = $1)`,
      [tenant],
    );
    for (let i = 0; i < count; i++) {
      const body = JSON.stringify({ data: { n: i }, subject: 'nia', tenant });
      await client.query(
        `WITH c AS (SELECT chain_id, head_seq + 1 AS seq, head_hash AS prev,
                           $1::timestamptz + make_interval(secs => $3::int) AS at
                      FROM audit.chains WHERE tenant = $4),
              e AS (INSERT INTO audit.events (chain_id, seq, occurred_at, type, body, prev_hash, hash, tenant, subject)
                    SELECT chain_id, seq, at, 'task.status_read', $2, prev,
                           audit.event_hash(chain_id, seq, at, 'task.status_read', prev, $2), $4, 'nia'
                      FROM c RETURNING chain_id, seq, hash, occurred_at)
         UPDATE audit.chains h SET head_seq = e.seq, head_hash = e.hash, head_at = e.occurred_at
           FROM e WHERE h.chain_id = e.chain_id`,
        [at, body, i, tenant],
      );
    }
  } finally {
    await client.end();
  }
}

async function history(db: TestDatabase) {
  await sql(
    db.url,
    `SELECT audit.ensure_partition(m) FROM unnest(ARRAY['2026-08-15Z', '2026-09-15Z', '2026-10-15Z']::timestamptz[]) m`,
  );
  await appendAt(db.url, '2026-08-20T10:00:00Z', 4); // 1..4
  await appendAt(db.url, '2026-09-20T10:00:00Z', 5); // 5..9
  await appendAt(db.url, '2026-10-20T10:00:00Z', 3); // 10..12
  await appendSamples(db.url, 3); // 13..15, this month: the head
}

let dataDir: string;
let out: string;
let db: TestDatabase;
const env = () => ({ DATABASE_URL: db.url, DATA_DIR: dataDir });

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'mtg-audit-archive-'));
  out = path.join(dataDir, 'archive');
  db = await createTestDatabase();
  await history(db);
});
afterAll(async () => {
  await db?.drop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

test('the job archives every closed month, oldest first, and detaches each after verifying its export', async () => {
  const run = await archive(['--out', out], env());
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  expect(run.stdout).toContain('signed the chain heads: 1 chain(s)');
  for (const [p, range] of [
    ['events_2026_08', '1..4 (4)'],
    ['events_2026_09', '5..9 (5)'],
    ['events_2026_10', '10..12 (3)'],
  ])
    expect(run.stdout).toContain(`archived ${p}: events ${range} of chain 1`);
  expect((await readdir(out)).sort()).toEqual([
    'events_2026_08.jsonl',
    'events_2026_09.jsonl',
    'events_2026_10.jsonl',
  ]);
  const attached = await sql(
    db.url,
    `SELECT partition FROM audit.partition_bounds() WHERE first_seq IS NOT NULL`,
  );
  expect(attached.map((r) => r.partition)).not.toContain('events_2026_10');
  expect(attached).toHaveLength(1); // this month's
  const archives = await sql(
    db.url,
    `SELECT partition, first_seq::int, last_seq::int, events::int FROM audit.archives ORDER BY first_seq`,
  );
  expect(archives.map((r) => [r.partition, r.first_seq, r.last_seq, r.events])).toEqual([
    ['events_2026_08', 1, 4, 4],
    ['events_2026_09', 5, 9, 5],
    ['events_2026_10', 10, 12, 3],
  ]);
  const verdicts = await sql(db.url, `SELECT kind, ok FROM audit.verifications ORDER BY id`);
  expect(verdicts).toEqual([
    { kind: 'archive', ok: true },
    { kind: 'archive', ok: true },
    { kind: 'archive', ok: true },
  ]);
  // Run again: nothing left to archive, the rest of the chain still verifies from the boundary.
  const again = await archive(['--out', out], env());
  expect(again.code).toBe(0);
  expect(again.stdout).toContain('no closed month to archive');
  const rest = await verify(['--from-checkpoint', '12', '--record'], {
    ...env(),
    DATABASE_ROLE: 'mtg_audit_signer',
  });
  expect(rest.stdout).toMatch(
    /^audit chain \d+ \(tenant "[^"]*"\) intact: 3 events \(seq 13\.\.15\), from the checkpoint at event 12/,
  );
  expect(rest.code).toBe(0);
  expect(
    (await sql(db.url, `SELECT kind, ok FROM audit.verifications ORDER BY id DESC LIMIT 1`))[0],
  ).toEqual({
    kind: 'verify',
    ok: true,
  });
});

test('audit:verify --archive verifies an exported month without a database', async () => {
  const result = await verify(['--archive', path.join(out, 'events_2026_09.jsonl')], {
    DATA_DIR: dataDir, // the dev public keys; no DATABASE_URL
  });
  expect(result.stdout).toBe(
    'archive intact: events_2026_09, events 5..9 (5) of chain 1, 2 checkpoint(s) verified\n',
  );
  expect(result.code).toBe(0);
});

describe('a tampered archive is refused, naming what is wrong', () => {
  const tampered = async (name: string, edit: (lines: string[]) => string[]) => {
    const lines = (await readFile(path.join(out, 'events_2026_09.jsonl'), 'utf8'))
      .trim()
      .split('\n');
    const file = path.join(dataDir, `${name}.jsonl`);
    await writeFile(file, edit(lines).join('\n') + '\n');
    return verify(['--archive', file], { DATA_DIR: dataDir });
  };
  // Line 0 is the header, 1 and 2 the checkpoints, 3.. the events 5..9.
  test.each([
    [
      'an event rewritten',
      (l: string[]) =>
        l.map((line, i) => (i === 4 ? line.replace('\\"n\\":1', '\\"n\\":7') : line)),
      /^archive BROKEN at event 6 \(modified\)/,
    ],
    [
      'an event removed',
      (l: string[]) => l.filter((_, i) => i !== 5),
      /^archive BROKEN at event 7 \(missing\)/,
    ],
    [
      'the boundary checkpoint removed',
      (l: string[]) =>
        l.filter((line) => !line.includes('"seq":9,') || !line.startsWith('{"checkpoint"')),
      /^archive BROKEN at event 9 \(no_boundary_checkpoint\)/,
    ],
    [
      'the tail cut with the header edited to match',
      (l: string[]) => [
        l[0]!.replace('"lastSeq":9', '"lastSeq":8').replace('"events":5', '"events":4'),
        ...l.slice(1, -1),
      ],
      /^archive BROKEN at event 8 \(no_boundary_checkpoint\)/,
    ],
  ])('%s', async (_name, edit, expected) => {
    const result = await tampered(_name.replace(/\W+/g, '-'), edit);
    expect(result.stdout).toMatch(expected);
    expect(result.code).toBe(1);
  });
});

test('a month whose chain does not verify is neither exported as good nor detached, though another tenant’s chain is intact', async () => {
  const broken = await createTestDatabase();
  try {
    await history(broken);
    // The signer still signs this intact chain; the archive must not take that as enough.
    await appendAt(broken.url, '2026-08-21T10:00:00Z', 2, 'globex');
    await sql(
      broken.url,
      `SET session_replication_role = replica;
       UPDATE audit.events_2026_08 SET body = replace(body, '"n":2', '"n":9') WHERE seq = 3`,
    );
    const run = await archive(['--out', path.join(dataDir, 'broken')], {
      DATABASE_URL: broken.url,
      DATA_DIR: dataDir,
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /^audit:archive: cannot sign a checkpoint: refusing to sign: chain \d+ \(tenant "acme"\): .*event 3/,
    );
    const attached = await sql(
      broken.url,
      `SELECT partition FROM audit.partition_bounds() WHERE first_seq IS NOT NULL ORDER BY 1`,
    );
    expect([...new Set(attached.map((r) => r.partition))].slice(0, 3)).toEqual([
      'events_2026_08',
      'events_2026_09',
      'events_2026_10',
    ]);
    expect(await sql(broken.url, `SELECT ok FROM audit.verifications`)).toEqual([{ ok: false }]);
    expect(await sql(broken.url, `SELECT 1 FROM audit.archives`)).toEqual([]);
  } finally {
    await broken.drop();
  }
});

test('months of several tenants: each chain is archived with its run, and a tenant idle since an archived month still verifies', async () => {
  const many = await createTestDatabase();
  const env2 = { DATABASE_URL: many.url, DATA_DIR: dataDir };
  try {
    await sql(
      many.url,
      `SELECT audit.ensure_partition(m) FROM unnest(ARRAY['2026-08-15Z', '2026-09-15Z']::timestamptz[]) m`,
    );
    await appendAt(many.url, '2026-08-20T10:00:00Z', 3); // acme 1..3 (chain 1)
    await appendAt(many.url, '2026-08-21T10:00:00Z', 2, 'globex'); // globex 1..2 (chain 2), idle since
    await appendAt(many.url, '2026-09-20T10:00:00Z', 2); // acme 4..5
    await appendSamples(many.url, 1); // acme 6, now
    const run = await archive(['--out', path.join(dataDir, 'many')], env2);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(
      'archived events_2026_08: events 1..3 (3) of chain 1, events 1..2 (2) of chain 2',
    );
    expect(run.stdout).toContain('archived events_2026_09: events 4..5 (2) of chain 1');
    const august = await verify(['--archive', path.join(dataDir, 'many', 'events_2026_08.jsonl')], {
      DATA_DIR: dataDir,
    });
    expect(august.stdout).toMatch(
      /^archive intact: events_2026_08, events 1\.\.3 \(3\) of chain 1, events 1\.\.2 \(2\) of chain 2/,
    );
    // globex has no event stored any more: from the latest checkpoint, its chain is its
    // recorded head, archived whole; acme goes on from its head.
    const rest = await verify(['--from-checkpoint', 'latest'], env2);
    expect(rest.stdout).toMatch(/^audit chains intact: \d+ events in 2 chains/);
    expect(rest.code).toBe(0);
    // The same chain with its head row cut back as well is still caught by the checkpoint.
    await sql(
      many.url,
      `SET session_replication_role = replica;
       UPDATE audit.chains SET head_seq = 1 WHERE tenant = 'globex'`,
    );
    const cut = await verify(['--from-checkpoint', 'latest'], env2);
    expect(cut.code).toBe(1);
    expect(cut.stdout).toMatch(/BROKEN at event 2 \(truncated\) in chain 2 \(tenant "globex"\)/);
  } finally {
    await many.drop();
  }
});
