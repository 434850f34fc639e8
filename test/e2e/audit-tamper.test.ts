// audit:verify against a tampering superuser: each scenario starts from a copy of one chain
// (50 events, signed checkpoints at events 40 and 50, also kept in a file outside the
// database), tampers with it the way someone who disabled the triggers could, and runs the
// real script as a child process: exit status and the first bad event it names.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { appendSamples, tamper } from '../../packages/audit/test/support/events.ts';
import { checkpointScript, verifyScript } from '../../packages/audit/test/support/run-script.ts';
import { cloneDatabase } from '../../packages/audit/test/support/template-database.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

let template: TestDatabase;
let dataDir: string;
let checkpointFile: string;

beforeAll(async () => {
  template = await createTestDatabase();
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'mtg-audit-tamper-'));
  checkpointFile = path.join(dataDir, 'checkpoints.jsonl');
  const env = { DATABASE_URL: template.url, DATA_DIR: dataDir };
  // Every sample is of tenant acme: one chain, chain 1. Checkpoints at its events 40 and 50.
  for (const count of [40, 10]) {
    await appendSamples(template.url, count);
    const signed = await checkpointScript(['--out', checkpointFile], env);
    expect(signed).toMatchObject({ code: 0 });
  }
});

afterAll(async () => {
  await template?.drop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

/** A copy of the chain, tampered with by `statements`, then verified by the real script. */
async function verifyAfter(
  statements: string[],
  options: { tables?: string[]; args?: string[] } = {},
) {
  const copy = await cloneDatabase(template.name);
  try {
    if (statements.length > 0) await tamper(copy.url, statements, options.tables);
    return await verifyScript(options.args ?? [], { DATABASE_URL: copy.url, DATA_DIR: dataDir });
  } finally {
    await copy.drop();
  }
}

// A change inside the details that keeps the body valid JSON and the query columns right.
const edited = `replace(body, '"data":{', '"data":{"x":1,')`;

test('an untouched chain verifies: exit 0 and a one-line summary', async () => {
  const result = await verifyAfter([]);
  expect(result.code).toBe(0);
  expect(result.stdout).toMatch(
    /^audit chain 1 \(tenant "acme"\) intact: 50 events \(seq 1\.\.50\), 2\/2 checkpoints verified \(latest: event 50, .*\), \d+ events\/s \(\d+\.\d+ s\)\n$/,
  );
});

test('an event whose body was edited is named as modified', async () => {
  const result = await verifyAfter([`UPDATE audit.events SET body = ${edited} WHERE seq = 17`]);
  expect(result.code).toBe(1);
  expect(result.stdout).toMatch(
    /^audit chain BROKEN at event 17 \(modified\) in chain 1 \(tenant "acme"\): event 17 was modified/,
  );
});

test('an event whose query column was changed (the hash does not cover it) is named as modified', async () => {
  const result = await verifyAfter([`UPDATE audit.events SET tenant = 'globex' WHERE seq = 18`]);
  expect(result.code).toBe(1);
  expect(result.stdout).toMatch(
    /^audit chain BROKEN at event 18 \(modified\) in chain 1 \(tenant "acme"\): .*column tenant is "globex", but the hashed body says "acme"/,
  );
});

test('a deleted event is named as missing', async () => {
  const result = await verifyAfter(['DELETE FROM audit.events WHERE seq = 23']);
  expect(result.code).toBe(1);
  expect(result.stdout).toMatch(
    /^audit chain BROKEN at event 23 \(missing\) in chain 1 \(tenant "acme"\): event 23 is missing/,
  );
});

test('two events swapped are named as reordered', async () => {
  const result = await verifyAfter([
    'UPDATE audit.events SET seq = 1000030 WHERE seq = 30',
    'UPDATE audit.events SET seq = 30 WHERE seq = 31',
    'UPDATE audit.events SET seq = 31 WHERE seq = 1000030',
  ]);
  expect(result.code).toBe(1);
  expect(result.stdout).toMatch(
    /^audit chain BROKEN at event 30 \(reordered\) in chain 1 \(tenant "acme"\): event 30 was moved: it is the event originally numbered 31/,
  );
});

test('a forged event inserted in the middle (valid hash, later events renumbered) is named as inserted', async () => {
  const body = `'{"subject":"mallory","tenant":"acme"}'`;
  const result = await verifyAfter([
    'UPDATE audit.events SET seq = seq + 1000000 WHERE seq >= 25',
    'UPDATE audit.events SET seq = seq - 999999 WHERE seq >= 1000000',
    `INSERT INTO audit.events (chain_id, seq, occurred_at, type, body, prev_hash, hash, tenant, subject)
       SELECT chain_id, 25, occurred_at, 'task.created', ${body}, hash,
              audit.event_hash(chain_id, 25, occurred_at, 'task.created', hash, ${body}), 'acme', 'mallory'
       FROM audit.events WHERE seq = 24`,
  ]);
  expect(result.code).toBe(1);
  expect(result.stdout).toMatch(
    /^audit chain BROKEN at event 25 \(inserted\) in chain 1 \(tenant "acme"\): event 25 was inserted/,
  );
});

test('a truncated tail behind a signed checkpoint is named from its first missing event', async () => {
  const result = await verifyAfter(['DELETE FROM audit.events WHERE seq > 45']);
  expect(result.code).toBe(1);
  expect(result.stdout).toMatch(
    /^audit chain BROKEN at event 46 \(truncated\) in chain 1 \(tenant "acme"\): the chain ends at event 45, but checkpoint .* attests event 50/,
  );
});

test('a tail truncated together with the stored checkpoints is caught by the checkpoints kept outside', async () => {
  const cut = ['DELETE FROM audit.events WHERE seq > 45', 'DELETE FROM audit.checkpoints'];
  // The chain's recorded head still says 50: that alone gives the cut away.
  const careless = await verifyAfter(cut, { tables: ['audit.events', 'audit.checkpoints'] });
  expect(careless.code).toBe(1);
  expect(careless.stdout).toMatch(
    /^audit chain BROKEN at event 46 \(truncated\) in chain 1 \(tenant "acme"\): the chain ends at event 45, but its recorded head \(audit\.chains\) is event 50/,
  );
  // Moved back with it, nothing in the database can tell: that is what the external copy is for.
  const statements = [
    ...cut,
    `UPDATE audit.chains SET head_seq = 45,
            head_hash = (SELECT hash FROM audit.events WHERE chain_id = 1 AND seq = 45)
      WHERE chain_id = 1`,
  ];
  const tables = ['audit.events', 'audit.checkpoints', 'audit.chains'];
  const blind = await verifyAfter(statements, { tables });
  expect(blind.code).toBe(0);
  const result = await verifyAfter(statements, { tables, args: ['--checkpoints', checkpointFile] });
  expect(result.code).toBe(1);
  expect(result.stdout).toMatch(
    /^audit chain BROKEN at event 46 \(truncated\) in chain 1 \(tenant "acme"\): .*checkpoints\.jsonl:2/,
  );
});

test('a tail cut from the latest checkpoint on fails the routine check from that checkpoint, stored or kept outside', async () => {
  // Events 49..50 gone, the latest checkpoint (event 50) kept: nothing is left to check after it.
  const cut = ['DELETE FROM audit.events WHERE seq >= 49'];
  const routine = await verifyAfter(cut, { args: ['--from-checkpoint', 'latest'] });
  expect(routine.code).toBe(1);
  expect(routine.stdout).toMatch(
    /^audit chain BROKEN at event 50 \(truncated\) in chain 1 \(tenant "acme"\): the chain ends before event 50, which the starting checkpoint audit\.checkpoints #2 .* attests/,
  );

  const statements = [...cut, 'DELETE FROM audit.checkpoints'];
  const outside = await verifyAfter(statements, {
    tables: ['audit.events', 'audit.checkpoints'],
    args: ['--checkpoints', checkpointFile, '--from-checkpoint', 'latest'],
  });
  expect(outside.code).toBe(1);
  expect(outside.stdout).toMatch(
    /^audit chain BROKEN at event 50 \(truncated\) in chain 1 \(tenant "acme"\): .*checkpoints\.jsonl:2/,
  );
});

test("the starting checkpoint's own event deleted while older events remain is named as missing, not taken for an archive", async () => {
  const result = await verifyAfter(['DELETE FROM audit.events WHERE seq = 40'], {
    args: ['--from-checkpoint', '40'],
  });
  expect(result.code).toBe(1);
  expect(result.stdout).toMatch(
    /^audit chain BROKEN at event 40 \(missing\) in chain 1 \(tenant "acme"\): event 40, which the starting checkpoint .* attests, is missing: older events are still stored/,
  );
});

test('a chain rewritten and rehashed from event 20 on is caught at the checkpoint it no longer matches', async () => {
  const result = await verifyAfter([
    `DO $$
     DECLARE r record; prev text; h text; b text;
     BEGIN
       SELECT hash INTO prev FROM audit.events WHERE seq = 19;
       FOR r IN SELECT * FROM audit.events WHERE seq >= 20 ORDER BY seq LOOP
         b := CASE WHEN r.seq = 20 THEN replace(r.body, '"data":{', '"data":{"x":1,') ELSE r.body END;
         h := audit.event_hash(r.chain_id, r.seq, r.occurred_at, r.type, prev, b);
         UPDATE audit.events SET body = b, prev_hash = prev, hash = h WHERE seq = r.seq;
         prev := h;
       END LOOP;
     END $$`,
  ]);
  expect(result.code).toBe(1);
  expect(result.stdout).toMatch(
    /^audit chain BROKEN at event 40 \(checkpoint_mismatch\) in chain 1 \(tenant "acme"\): event 40 is not the event checkpoint .* attests .*from the start/,
  );
});

test('an event rewritten with a recomputed hash breaks the link of the next one', async () => {
  const result = await verifyAfter([
    `UPDATE audit.events SET body = ${edited},
            hash = audit.event_hash(chain_id, seq, occurred_at, type, prev_hash, ${edited}) WHERE seq = 12`,
  ]);
  expect(result.code).toBe(1);
  expect(result.stdout).toMatch(
    /^audit chain BROKEN at event 13 \(broken_link\) in chain 1 \(tenant "acme"\): event 13 does not link to its predecessor/,
  );
});
