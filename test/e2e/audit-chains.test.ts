// One hash chain per tenant (migration 080), end to end on real PostgreSQL through the real
// scripts: gapless chains under concurrent writers of many tenants, a tampered tenant chain
// named while the others stay intact, a checkpoint of every head catching one chain's cut
// tail, a tenant's export verified on its own, and a single-chain database carried forward.
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CompactSign } from 'jose';
import pg from 'pg';
import { canonicalJson, generateSigningJwk, loadSigningKey, publicJwkOf } from '@mtg/audit';
import { migrate } from '@mtg/db';
import { sampleEvent, tamper } from '../../packages/audit/test/support/events.ts';
import {
  checkpointScript,
  runScript,
  verifyScript,
} from '../../packages/audit/test/support/run-script.ts';
import { createTestDatabase, MIGRATIONS_DIR, type TestDatabase } from '../support/database.ts';
import { sql } from '../support/sql.ts';

let db: TestDatabase;
let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-audit-chains-'));
});
afterEach(async () => {
  await db?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const env = () => ({ DATABASE_URL: db.url, DATA_DIR: path.join(dir, 'data') });

/** Appends events of these tenants (undefined: a system event), in turn, as mtg_gateway. */
async function appendRound(url: string, tenants: (string | undefined)[], rounds: number) {
  const client = new pg.Client({ connectionString: url, options: '-c role=mtg_gateway' });
  await client.connect();
  try {
    for (let i = 0; i < rounds; i++) {
      for (const t of tenants) {
        const { type, ...body } = sampleEvent(i, t ?? 'x');
        if (t === undefined) delete body.tenant;
        await client.query('SELECT audit.append($1, $2)', [type, canonicalJson(body)]);
      }
    }
  } finally {
    await client.end();
  }
}

const chainOf = async (tenant: string) =>
  Number(
    (await sql(db.url, 'SELECT chain_id FROM audit.chains WHERE tenant = $1', [tenant]))[0]
      .chain_id,
  );

test('writers of many tenants in several processes at once: every chain is gapless, linked and verifies', async () => {
  db = await createTestDatabase();
  const processes = 4;
  const connections = 4;
  const perConnection = 60;
  const tenants = 6;
  const startAt = String(Date.now() + 1500);
  const results = await Promise.all(
    ['tx', 'auto', 'pool', 'auto']
      .slice(0, processes)
      .map((mode) =>
        runScript(
          'packages/audit/test/support/append-worker.ts',
          [db.url, String(connections), String(perConnection), startAt, mode, String(tenants)],
          {},
        ),
      ),
  );
  for (const r of results) expect(r).toMatchObject({ code: 0 });
  const total = processes * connections * perConnection;

  const chains = await sql(
    db.url,
    `SELECT chain_id::int AS chain, count(*)::int AS n, min(seq)::int AS lo, max(seq)::int AS hi,
            count(DISTINCT seq)::int AS distinct, count(DISTINCT tenant)::int AS tenants,
            min(tenant) AS tenant
       FROM audit.events GROUP BY chain_id ORDER BY chain_id`,
  );
  // The system chain and one per tenant (connections 0..3 of each process write tenants
  // shared-0..3; 6 > 4, so four tenant chains), each 1..n without a gap or a repeat.
  expect(chains).toHaveLength(1 + Math.min(tenants, connections));
  expect(chains.reduce((n, c) => n + c.n, 0)).toBe(total);
  for (const c of chains) {
    expect(c).toMatchObject({ lo: 1, hi: c.n, distinct: c.n });
    expect(c.tenants).toBe(c.chain === 0 ? 0 : 1);
  }
  // Each event links to its predecessor in its own chain, and the recorded head is the last.
  const links = await sql(
    db.url,
    `SELECT count(*)::int AS bad FROM (
       SELECT prev_hash, lag(hash) OVER (PARTITION BY chain_id ORDER BY seq) AS previous, seq
         FROM audit.events) e
      WHERE prev_hash <> coalesce(previous, repeat('0', 64))`,
  );
  expect(links[0].bad).toBe(0);
  const heads = await sql(
    db.url,
    `SELECT count(*)::int AS bad FROM audit.chains c
      WHERE head_seq <> (SELECT max(seq) FROM audit.events e WHERE e.chain_id = c.chain_id)`,
  );
  expect(heads[0].bad).toBe(0);

  const verified = await verifyScript([], env());
  expect(verified.code).toBe(0);
  expect(verified.stdout).toMatch(
    new RegExp(`^audit chains intact: ${total} events in ${chains.length} chains`),
  );
});

test("a tampered event in tenant A's chain is named with its chain; tenant B's chain is reported intact", async () => {
  db = await createTestDatabase();
  await appendRound(db.url, ['acme', 'globex', undefined], 6);
  const acme = await chainOf('acme');
  const globex = await chainOf('globex');
  expect(await checkpointScript([], env())).toMatchObject({ code: 0 });
  await tamper(db.url, [
    `UPDATE audit.events SET body = replace(body, '"subject":"nia"', '"subject":"eve"')
      WHERE chain_id = ${acme} AND seq = 3`,
  ]);

  const all = await verifyScript([], env());
  expect(all.code).toBe(1);
  expect(all.stdout).toMatch(
    new RegExp(
      `^audit chain BROKEN at event 3 \\(modified\\) in chain ${acme} \\(tenant "acme"\\): event 3 was modified`,
    ),
  );
  expect(all.stdout).toContain(`chain ${globex} (tenant "globex"): intact, 6 events (seq 1..6)`);
  expect(all.stdout).toContain('chain 0 (system): intact, 6 events (seq 1..6)');
  const json = JSON.parse((await verifyScript(['--json'], env())).stdout);
  expect(json.failures).toEqual([
    expect.objectContaining({ chain: acme, tenant: 'acme', seq: 3, code: 'modified' }),
  ]);
  expect(json.chains.find((c: { chain: number }) => c.chain === globex)).toMatchObject({
    ok: true,
    events: 6,
  });

  // Each tenant's chain on its own.
  const b = await verifyScript(['--tenant', 'globex'], env());
  expect(b.code).toBe(0);
  expect(b.stdout).toMatch(
    new RegExp(`^audit chain ${globex} \\(tenant "globex"\\) intact: 6 events \\(seq 1\\.\\.6\\)`),
  );
  const a = await verifyScript(['--tenant', 'acme'], env());
  expect(a.code).toBe(1);
  expect(a.stdout).toMatch(/^audit chain BROKEN at event 3 \(modified\)/);
  const none = await verifyScript(['--tenant', 'initech'], env());
  expect(none.code).toBe(2);
  expect(none.stderr).toMatch(/tenant "initech" has no audit chain/);
});

test('an event moved into another tenant’s chain, rehashed there, is named as being of the wrong chain', async () => {
  db = await createTestDatabase();
  await appendRound(db.url, ['acme', 'globex'], 3);
  const globex = await chainOf('globex');
  // A forger with the owner's rights appends a copy of an acme event to globex's chain with a
  // correct hash and link: only the tenant says it does not belong there.
  await tamper(
    db.url,
    [
      `INSERT INTO audit.events (chain_id, seq, occurred_at, type, body, prev_hash, hash, tenant, subject, task_id, client, tool, correlation_id)
         SELECT ${globex}, 4, now(), e.type, e.body, c.head_hash,
                audit.event_hash(${globex}, 4, now(), e.type, c.head_hash, e.body),
                e.tenant, e.subject, e.task_id, e.client, e.tool, e.correlation_id
           FROM audit.events e, audit.chains c
          WHERE e.tenant = 'acme' AND e.seq = 1 AND c.chain_id = ${globex}`,
      `UPDATE audit.chains SET head_seq = 4,
              head_hash = (SELECT hash FROM audit.events WHERE chain_id = ${globex} AND seq = 4)
        WHERE chain_id = ${globex}`,
    ],
    ['audit.events', 'audit.chains'],
  );
  const r = await verifyScript(['--tenant', 'globex'], env());
  expect(r.code).toBe(1);
  expect(r.stdout).toMatch(
    /^audit chain BROKEN at event 4 \(wrong_chain\) .*: event 4 is of tenant "acme", not of this chain's tenant "globex"/,
  );
});

test("a checkpoint signs every chain's head; one chain's tail cut after it is caught, in full and from the checkpoint", async () => {
  db = await createTestDatabase();
  await appendRound(db.url, ['acme', 'globex', 'initech', undefined], 5);
  const signed = await checkpointScript(['--out', path.join(dir, 'checkpoints.jsonl')], env());
  expect(signed.code).toBe(0);
  const line = JSON.parse(signed.stdout);
  const heads = await sql(
    db.url,
    'SELECT chain_id::int AS chain, seq::int, hash FROM audit.chain_heads ORDER BY chain_id',
  );
  expect(line.heads).toEqual(heads);
  expect(line.chains).toBe(4);
  const stored = await sql(db.url, 'SELECT heads, heads_hash, seq FROM audit.checkpoints');
  expect(stored).toEqual([{ heads, heads_hash: line.headsHash, seq: null }]);

  const initech = await chainOf('initech');
  // The tail of one chain, and its head row with it, as a careful tamperer would.
  await tamper(
    db.url,
    [
      `DELETE FROM audit.events WHERE chain_id = ${initech} AND seq >= 4`,
      `UPDATE audit.chains SET head_seq = 3, head_hash = (SELECT hash FROM audit.events WHERE chain_id = ${initech} AND seq = 3) WHERE chain_id = ${initech}`,
    ],
    ['audit.events', 'audit.chains'],
  );
  const full = await verifyScript([], env());
  expect(full.code).toBe(1);
  expect(full.stdout).toMatch(
    new RegExp(
      `^audit chain BROKEN at event 4 \\(truncated\\) in chain ${initech} \\(tenant "initech"\\)`,
    ),
  );
  expect(full.stdout).toMatch(/chain \d+ \(tenant "acme"\): intact/);
  const latest = await verifyScript(['--from-checkpoint', 'latest'], env());
  expect(latest.code).toBe(1);
  expect(latest.stdout).toMatch(/^audit chain BROKEN at event 5 \(truncated\)/);
  // The stored checkpoints deleted too: the copy kept outside still catches it.
  await tamper(db.url, ['DELETE FROM audit.checkpoints'], ['audit.checkpoints']);
  const outside = await verifyScript(['--checkpoints', path.join(dir, 'checkpoints.jsonl')], env());
  expect(outside.code).toBe(1);
  expect(outside.stdout).toMatch(/^audit chain BROKEN at event 4 \(truncated\)/);
});

test('one chain fell below the head a checkpoint attests: it alone is refused, the intact chains are still signed', async () => {
  db = await createTestDatabase();
  await appendRound(db.url, ['acme', 'globex'], 4);
  expect(await checkpointScript([], env())).toMatchObject({ code: 0 });
  const globex = await chainOf('globex');
  const acme = await chainOf('acme');
  await tamper(db.url, [`DELETE FROM audit.events WHERE chain_id = ${globex} AND seq = 4`]);
  await appendRound(db.url, ['acme'], 2);
  const refused = await checkpointScript([], env());
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(
    new RegExp(`refusing to sign: chain ${globex} \\(tenant "globex"\\): .*event 4`),
  );
  expect(refused.stderr).toMatch(
    new RegExp(
      `error: signed 1 intact chain\\(s\\); refused 1: chain ${globex} \\(tenant "globex"\\)`,
    ),
  );
  // acme's new head is signed; globex keeps only what the first checkpoint attested.
  const signed = JSON.parse(refused.stdout);
  const acmeHead = await sql(
    db.url,
    'SELECT chain_id::int AS chain, seq::int, hash FROM audit.chain_heads WHERE chain_id = $1',
    [acme],
  );
  expect(signed.heads).toEqual(acmeHead);
  expect(acmeHead[0].seq).toBe(6);
});

test("one tenant's tampered chain does not leave the other tenants without a checkpoint: their bundles still verify", async () => {
  db = await createTestDatabase();
  await appendRound(db.url, ['acme', 'globex', undefined], 3);
  expect(await checkpointScript([], env())).toMatchObject({ code: 0 });
  const acme = await chainOf('acme');
  const globex = await chainOf('globex');
  await appendRound(db.url, ['acme', 'globex', undefined], 2);
  await tamper(db.url, [
    `UPDATE audit.events SET body = replace(body, '"data":{', '"data":{"x":1,') WHERE chain_id = ${acme} AND seq = 4`,
  ]);

  const run = await checkpointScript([], env());
  expect(run.code).toBe(1);
  expect(run.stderr).toMatch(
    new RegExp(`refusing to sign: chain ${acme} \\(tenant "acme"\\): event 4 was modified`),
  );
  expect(run.stderr).not.toMatch(/globex|system/);
  const line = JSON.parse(run.stdout);
  expect(line.heads.map((h: { chain: number }) => h.chain)).toEqual([0, globex]);
  expect(line.heads.find((h: { chain: number }) => h.chain === globex).seq).toBe(5);
  expect(await sql(db.url, 'SELECT count(*)::int AS n FROM audit.checkpoints')).toEqual([{ n: 2 }]);

  // globex's evidence up to its current head is covered by the new checkpoint.
  const file = path.join(dir, 'globex.json');
  const exported = await runScript(
    'scripts/audit.ts',
    [
      'bundle',
      '--from',
      '2000-01-01T00:00Z',
      '--to',
      '2100-01-01T00:00Z',
      '--tenant',
      'globex',
      '--out',
      file,
    ],
    env(),
  );
  expect(exported).toMatchObject({ code: 0 });
  const keys = path.join(dir, 'data', 'audit', 'jwks.json');
  const offline = await verifyScript(['--bundle', file, '--keys', keys], {});
  expect(offline.stdout).toMatch(new RegExp(`verified: events 1\\.\\.5 of chain ${globex}`));
  expect(offline.code).toBe(0);

  // The refused chain stays refused on later runs, which keep signing the others.
  await appendRound(db.url, ['globex'], 1);
  const again = await checkpointScript([], env());
  expect(again.code).toBe(1);
  expect(
    JSON.parse(again.stdout).heads.find((h: { chain: number }) => h.chain === globex).seq,
  ).toBe(6);
  // And verification still names the broken chain (the alarm the checkpoint job records).
  const verified = await verifyScript(['--from-checkpoint', 'latest'], env());
  expect(verified.code).toBe(1);
  expect(verified.stdout).toMatch(
    new RegExp(`BROKEN at event 4 \\(modified\\) in chain ${acme} \\(tenant "acme"\\)`),
  );
});

test('--every goes on signing the intact chains past a refused one, and exits 1 on SIGTERM after a refusal', async () => {
  db = await createTestDatabase();
  await appendRound(db.url, ['acme', 'globex'], 3);
  expect(await checkpointScript([], env())).toMatchObject({ code: 0 });
  const acme = await chainOf('acme');
  const globex = await chainOf('globex');
  await tamper(db.url, [`DELETE FROM audit.events WHERE chain_id = ${acme} AND seq = 3`]);
  const lines: string[] = [];
  const stop = new AbortController();
  let appended = false;
  const result = await runScript('scripts/audit-checkpoint.ts', ['--every', '0.2'], env(), {
    signal: stop.signal,
    onStdout: (chunk) => {
      lines.push(...chunk.split('\n').filter(Boolean));
      if (lines.length === 1 && !appended) {
        appended = true;
        void appendRound(db.url, ['globex'], 2);
      }
      if (lines.length === 2) stop.abort();
    },
  });
  expect(result.code).toBe(1);
  expect(lines.map((l) => JSON.parse(l).heads)).toEqual([
    [expect.objectContaining({ chain: globex, seq: 3 })],
    [expect.objectContaining({ chain: globex, seq: 5 })],
  ]);
  expect(result.stderr.match(/refused 1: chain \d+ \(tenant "acme"\)/g)).toHaveLength(2);
});

test("a tenant's export carries its own chain and the checkpoint's heads, and verifies offline on its own", async () => {
  db = await createTestDatabase();
  await appendRound(db.url, ['acme', 'globex', undefined], 5);
  expect(await checkpointScript([], env())).toMatchObject({ code: 0 });
  const file = path.join(dir, 'acme.json');
  const exported = await runScript(
    'scripts/audit.ts',
    [
      'bundle',
      '--from',
      '2000-01-01T00:00Z',
      '--to',
      '2100-01-01T00:00Z',
      '--tenant',
      'acme',
      '--out',
      file,
    ],
    env(),
  );
  expect(exported).toMatchObject({ code: 0 });
  const text = await readFile(file, 'utf8');
  const bundle = JSON.parse(text);
  const acme = await chainOf('acme');
  expect(bundle.chains).toEqual([{ chain: acme, tenant: 'acme', firstSeq: 1, lastSeq: 5 }]);
  expect(bundle.events).toHaveLength(5);
  // Nothing of another tenant's events, only the heads of their chains.
  expect(text).not.toContain('globex');
  expect(bundle.checkpoint.heads).toHaveLength(3);

  // Offline: the file and the public keys, no database named.
  const keys = path.join(dir, 'data', 'audit', 'jwks.json');
  const offline = await verifyScript(['--bundle', file, '--keys', keys], {});
  expect(offline.code).toBe(0);
  expect(offline.stdout).toMatch(
    new RegExp(
      `^bundle .*acme\\.json verified: events 1\\.\\.5 of chain ${acme} \\(tenant acme\\)`,
    ),
  );
  // One other tenant's head changed in the list: the signature no longer covers it.
  const other = bundle.checkpoint.heads.find((h: { chain: number }) => h.chain !== acme);
  other.seq += 1;
  await writeFile(file, JSON.stringify(bundle));
  const forged = await verifyScript(['--bundle', file, '--keys', keys], {});
  expect(forged.code).toBe(1);
  expect(forged.stdout).toMatch(/BROKEN \(bad_checkpoint\)/);
});

test('a single-chain database is carried forward: the legacy segment and its checkpoint verify, new events go to per-tenant chains', async () => {
  db = await createTestDatabase({ migrate: false });
  // The migrations as they were before chains existed.
  const before = path.join(dir, 'migrations-before');
  await mkdir(before);
  for (const f of await readdir(MIGRATIONS_DIR)) {
    if (/^\d{3}_/.test(f) && f < '080')
      await copyFile(path.join(MIGRATIONS_DIR, f), path.join(before, f));
  }
  await migrate(db.url, before);
  // Events through the pre-migration audit.append(): one chain for every tenant.
  await appendRound(db.url, ['acme', 'globex', undefined], 4);
  const legacy = await sql(
    db.url,
    'SELECT seq::int, hash, occurred_at FROM audit.events ORDER BY seq',
  );
  expect(legacy.map((e) => e.seq)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
  // A checkpoint as the pre-migration signer wrote it: {seq, hash, occurredAt, signedAt}.
  const jwk = await generateSigningJwk();
  const key = await loadSigningKey(jwk);
  const last = legacy.at(-1)!;
  const [at] = await sql(
    db.url,
    `SELECT to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS t FROM audit.events WHERE seq = 12`,
  );
  const payload = {
    hash: last.hash,
    occurredAt: at.t,
    seq: 12,
    signedAt: new Date().toISOString(),
  };
  const jws = await new CompactSign(new TextEncoder().encode(canonicalJson(payload)))
    .setProtectedHeader({ alg: 'EdDSA', kid: key.keyId, typ: 'mtg-audit-checkpoint' })
    .sign(key.privateKey);
  await sql(db.url, 'SELECT audit.record_checkpoint($1, $2, $3, $4, $5)', [
    12,
    last.hash,
    payload.signedAt,
    key.keyId,
    jws,
  ]);

  await migrate(db.url, MIGRATIONS_DIR);
  // Not a row rewritten: the same events, now chain 0, whose legacy segment ends at 12.
  const carried = await sql(
    db.url,
    'SELECT seq::int, hash, occurred_at, chain_id::int FROM audit.events ORDER BY seq',
  );
  expect(carried).toEqual(legacy.map((e) => ({ ...e, chain_id: 0 })));
  expect(
    await sql(
      db.url,
      'SELECT chain_id::int, tenant, seq::int, legacy_until::int FROM audit.chain_heads',
    ),
  ).toEqual([{ chain_id: 0, tenant: null, seq: 12, legacy_until: 12 }]);

  await appendRound(db.url, ['acme', 'globex', undefined], 2);
  const after = await sql(
    db.url,
    'SELECT chain_id::int AS chain, tenant, min(seq)::int AS lo, max(seq)::int AS hi FROM audit.events WHERE seq > 0 GROUP BY chain_id, tenant ORDER BY chain_id, tenant NULLS FIRST',
  );
  expect(after).toEqual([
    { chain: 0, tenant: null, lo: 3, hi: 14 }, // the legacy system events, then 13, 14
    { chain: 0, tenant: 'acme', lo: 1, hi: 10 },
    { chain: 0, tenant: 'globex', lo: 2, hi: 11 },
    { chain: 1, tenant: 'acme', lo: 1, hi: 2 },
    { chain: 2, tenant: 'globex', lo: 1, hi: 2 },
  ]);

  // Both keys: the legacy checkpoint's and the dev key the signer creates now.
  expect(await checkpointScript([], env())).toMatchObject({ code: 0 });
  const dev = JSON.parse(await readFile(path.join(dir, 'data', 'audit', 'jwks.json'), 'utf8'));
  const keys = path.join(dir, 'keys.json');
  await writeFile(keys, JSON.stringify({ keys: [...dev.keys, publicJwkOf(jwk)] }));
  const verified = await verifyScript(['--keys', keys, '--json'], env());
  expect(verified.code).toBe(0);
  const report = JSON.parse(verified.stdout);
  expect(report.chains.map((c: { chain: number; events: number }) => [c.chain, c.events])).toEqual([
    [0, 14],
    [1, 2],
    [2, 2],
  ]);
  expect(report.checkpoints).toMatchObject({ total: 2, verified: 2, matched: 4 });

  // A legacy event edited is caught with the formula it was written with.
  await tamper(db.url, [
    `UPDATE audit.events SET body = replace(body, '"subject":"nia"', '"subject":"eve"') WHERE chain_id = 0 AND seq = 5`,
  ]);
  const broken = await verifyScript(['--keys', keys], env());
  expect(broken.code).toBe(1);
  expect(broken.stdout).toMatch(
    /^audit chain BROKEN at event 5 \(modified\) in chain 0 \(system\)/,
  );
  // Moving the legacy boundary (so event 13 would be read with the old formula) is refused
  // against the signed boundary.
  await tamper(
    db.url,
    ['UPDATE audit.chains SET legacy_until = 14 WHERE chain_id = 0'],
    ['audit.chains'],
  );
  const moved = await verifyScript(['--keys', keys], env());
  expect(moved.code).toBe(1);
  expect(moved.stdout).toMatch(/in chain 0 \(system\): chain 0's legacy segment ends at event 14/);
  // The signer refuses chain 0 for it and signs the tenants' chains under the signed boundary.
  await appendRound(db.url, ['acme'], 1);
  const signer = await checkpointScript([], env());
  expect(signer.code).toBe(1);
  expect(signer.stderr).toMatch(
    /refusing to sign: chain 0 \(system\): chain 0's legacy segment ends at event 14 by audit\.chains, but a checkpoint signed event 12/,
  );
  const partial = JSON.parse(signer.stdout);
  expect(partial.heads.map((h: { chain: number }) => h.chain)).toEqual([1, 2]);
  expect(partial.legacyUntil).toBe(12);
});
