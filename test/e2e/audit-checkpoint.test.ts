// Signed checkpoints, end to end through the real scripts: the dev key, exporting, keys that
// do not match, rotation, periodic signing, and a signer that refuses a broken chain.
import { mkdtemp, readFile, rm, stat, writeFile, chmod } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { generateSigningJwk, publicJwkOf } from '@mtg/audit';
import { appendSamples, tamper } from '../../packages/audit/test/support/events.ts';
import {
  checkpointScript,
  runScript,
  verifyScript,
} from '../../packages/audit/test/support/run-script.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { sql } from '../support/sql.ts';

let db: TestDatabase;
let dir: string;

beforeEach(async () => {
  db = await createTestDatabase();
  dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-audit-checkpoint-'));
  await appendSamples(db.url, 12);
});
afterEach(async () => {
  await db?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const env = () => ({ DATABASE_URL: db.url, DATA_DIR: path.join(dir, 'data') });

async function jwksFile(name: string, keys: object[]): Promise<string> {
  const file = path.join(dir, name);
  await writeFile(file, JSON.stringify({ keys }));
  return file;
}

test('the first checkpoint generates the dev key (mode 0600), signs the head, stores and prints it', async () => {
  const out = path.join(dir, 'outside', 'checkpoints.jsonl');
  const result = await checkpointScript(['--out', out], env());
  expect(result.code).toBe(0);
  expect(result.stderr).toMatch(/generated the dev signing key .*audit\/signing-key\.json/);
  const keyFile = path.join(dir, 'data', 'audit', 'signing-key.json');
  expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
  const jwks = JSON.parse(await readFile(path.join(dir, 'data', 'audit', 'jwks.json'), 'utf8'));
  expect(jwks.keys).toHaveLength(1);
  expect(jwks.keys[0].d).toBeUndefined();

  const printed = JSON.parse(result.stdout);
  // The samples are one tenant's: one chain, whose head is the one head signed.
  const [head] = await sql(
    db.url,
    'SELECT chain_id::int AS chain, seq::int, hash FROM audit.events ORDER BY seq DESC LIMIT 1',
  );
  expect(printed).toMatchObject({ heads: [head], chains: 1, keyId: jwks.keys[0].kid });
  expect(printed.jws.split('.')).toHaveLength(3);
  expect((await readFile(out, 'utf8')).trim()).toBe(result.stdout.trim());
  const stored = await sql(
    db.url,
    'SELECT seq, hash, heads, heads_hash, key_id, jws FROM audit.checkpoints',
  );
  expect(stored).toEqual([
    {
      seq: null,
      hash: null,
      heads: [head],
      heads_hash: printed.headsHash,
      key_id: printed.keyId,
      jws: printed.jws,
    },
  ]);

  // The next run reuses the key, and only verifies what was appended since.
  await appendSamples(db.url, 3);
  const again = await checkpointScript([], env());
  expect(again.code).toBe(0);
  expect(again.stderr).toBe('');
  expect(JSON.parse(again.stdout)).toMatchObject({
    heads: [{ chain: head.chain, seq: head.seq + 3 }],
    keyId: printed.keyId,
  });
});

test('a checkpoint does not verify with another key: unknown kid, or the right kid with other key material', async () => {
  expect((await checkpointScript([], env())).code).toBe(0);
  const real = JSON.parse(await readFile(path.join(dir, 'data', 'audit', 'jwks.json'), 'utf8'))
    .keys[0];

  const other = publicJwkOf(await generateSigningJwk());
  const unknown = await verifyScript(['--keys', await jwksFile('other.json', [other])], env());
  expect(unknown.code).toBe(1);
  expect(unknown.stdout).toMatch(
    /^checkpoint problem \(unknown_key\): checkpoint audit\.checkpoints #1: signed with a key that is not in the public keys given/m,
  );

  const impostor = await verifyScript(
    ['--keys', await jwksFile('impostor.json', [{ ...other, kid: real.kid }])],
    env(),
  );
  expect(impostor.code).toBe(1);
  expect(impostor.stdout).toMatch(
    /^checkpoint problem \(bad_signature\): .*the signature does not verify/m,
  );

  const right = await verifyScript(['--keys', path.join(dir, 'data', 'audit', 'jwks.json')], env());
  expect(right.code).toBe(0);
  expect(right.stdout).toMatch(/1\/1 checkpoints verified/);
});

test('a checkpoint file whose payload was altered fails its signature', async () => {
  const signed = JSON.parse((await checkpointScript([], env())).stdout);
  const [header, payload, signature] = signed.jws.split('.');
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
  const forged = Buffer.from(JSON.stringify({ ...claims, chains: claims.chains + 1 })).toString(
    'base64url',
  );
  const file = path.join(dir, 'forged.jsonl');
  await writeFile(file, JSON.stringify({ jws: `${header}.${forged}.${signature}` }) + '\n');
  const result = await verifyScript(['--checkpoints', file], env());
  expect(result.code).toBe(1);
  expect(result.stdout).toMatch(/checkpoint problem \(bad_signature\): checkpoint forged\.jsonl:1/);
});

test('verification needs the public keys once there are checkpoints', async () => {
  const key = path.join(dir, 'key.json');
  expect((await checkpointScript(['--new-key', key], env())).code).toBe(0);
  expect((await checkpointScript([], { ...env(), AUDIT_SIGNING_KEY_FILE: key })).code).toBe(0);
  const result = await verifyScript([], {
    DATABASE_URL: db.url,
    DATA_DIR: path.join(dir, 'empty'),
  });
  expect(result.code).toBe(2);
  expect(result.stderr).toMatch(/1 checkpoint\(s\) to verify but no public keys/);
});

test('key rotation: checkpoints of the old and the new key both verify with a JWKS holding both', async () => {
  const jwks = path.join(dir, 'published', 'jwks.json');
  const oldKey = path.join(dir, 'keys', 'old.json');
  const newKey = path.join(dir, 'keys', 'new.json');
  const made = await checkpointScript(['--new-key', oldKey, '--jwks', jwks], env());
  expect(made.code).toBe(0);
  expect((await stat(oldKey)).mode & 0o777).toBe(0o600);
  const oldKid = JSON.parse(made.stdout).kid;

  const first = await checkpointScript([], {
    ...env(),
    AUDIT_SIGNING_KEY_FILE: oldKey,
    AUDIT_JWKS_FILE: jwks,
  });
  expect(first.code).toBe(0);
  await appendSamples(db.url, 2);
  expect((await checkpointScript(['--new-key', newKey, '--jwks', jwks], env())).code).toBe(0);
  const second = await checkpointScript([], {
    ...env(),
    AUDIT_SIGNING_KEY_FILE: newKey,
    AUDIT_JWKS_FILE: jwks,
  });
  expect(second.code).toBe(0);
  const newKid = JSON.parse(second.stdout).keyId;
  expect(newKid).not.toBe(oldKid);

  const both = await verifyScript(['--keys', jwks], env());
  expect(both.code).toBe(0);
  expect(both.stdout).toMatch(
    new RegExp(`2/2 checkpoints verified \\(latest: event 14, .*key ${newKid}\\)`),
  );

  const onlyNew = await jwksFile(
    'only-new.json',
    JSON.parse(await readFile(jwks, 'utf8')).keys.filter((k: { kid: string }) => k.kid === newKid),
  );
  const dropped = await verifyScript(['--keys', onlyNew], env());
  expect(dropped.code).toBe(1);
  expect(dropped.stdout).toMatch(/unknown_key/);
});

test('the signer refuses to sign a chain that does not verify, and names the bad event', async () => {
  expect((await checkpointScript([], env())).code).toBe(0);
  await appendSamples(db.url, 4);
  await tamper(db.url, [
    `UPDATE audit.events SET body = replace(body, '"data":{', '"data":{"x":1,') WHERE seq = 14`,
  ]);
  const result = await checkpointScript([], env());
  expect(result.code).toBe(1);
  expect(result.stderr).toMatch(
    /refusing to sign: chain 1 \(tenant "acme"\): event 14 was modified/,
  );
  expect(result.stdout).toBe('');
  expect(await sql(db.url, 'SELECT count(*)::int AS n FROM audit.checkpoints')).toEqual([{ n: 1 }]);
});

test('the signer refuses to sign a head below a checkpoint already signed (a cut tail), or an emptied chain', async () => {
  expect((await checkpointScript([], env())).code).toBe(0); // event 12
  await tamper(db.url, ['DELETE FROM audit.events WHERE seq >= 11']);
  const lower = await checkpointScript([], env());
  expect(lower.code).toBe(1);
  expect(lower.stderr).toMatch(
    /refusing to sign: chain 1 \(tenant "acme"\): the chain ends at event 10, but checkpoint audit\.checkpoints #1 \(event 12, .*\) attests event 12: events 11\.\.12 are gone/,
  );
  expect(lower.stdout).toBe('');

  // The same once the chain grew back past the signed head with other events (appends go on
  // from the chain's recorded head, 12, so the signed event 12 stays missing), and once event
  // 12 itself is back with other content.
  await appendSamples(db.url, 3);
  const regrown = await checkpointScript([], env());
  expect(regrown.code).toBe(1);
  expect(regrown.stderr).toMatch(
    /refusing to sign: chain 1 \(tenant "acme"\): event 12, which .*checkpoint .* attests, is missing/,
  );
  await tamper(db.url, [
    `INSERT INTO audit.events (chain_id, seq, occurred_at, type, body, prev_hash, hash, tenant)
       SELECT chain_id, 12, occurred_at, type, '{"tenant":"acme"}', hash,
              audit.event_hash(chain_id, 12, occurred_at, type, hash, '{"tenant":"acme"}'), 'acme'
         FROM audit.events WHERE chain_id = 1 AND seq = 10`,
  ]);
  const replaced = await checkpointScript([], env());
  expect(replaced.code).toBe(1);
  expect(replaced.stderr).toMatch(
    /refusing to sign: chain 1 \(tenant "acme"\): event 12 is not the event/,
  );

  await tamper(db.url, ['DELETE FROM audit.events']);
  const emptied = await checkpointScript([], env());
  expect(emptied.code).toBe(1);
  expect(emptied.stderr).toMatch(
    /refusing to sign: chain 1 \(tenant "acme"\): the chain ends at event 0, but checkpoint/,
  );
  expect(await sql(db.url, 'SELECT count(*)::int AS n FROM audit.checkpoints')).toEqual([{ n: 1 }]);
});

test('--every signs whenever the head has moved and stops cleanly on SIGTERM', async () => {
  const lines: string[] = [];
  const stop = new AbortController();
  let appended = false;
  const running = runScript('scripts/audit-checkpoint.ts', ['--every', '0.2'], env(), {
    signal: stop.signal,
    onStdout: (chunk) => {
      lines.push(...chunk.split('\n').filter(Boolean));
      if (lines.length === 1 && !appended) {
        appended = true;
        void appendSamples(db.url, 2);
      }
      if (lines.length === 2) stop.abort();
    },
  });
  const result = await running;
  expect(result.code).toBe(0);
  expect(lines.map((l) => JSON.parse(l).heads.map((h: { seq: number }) => h.seq))).toEqual([
    [12],
    [14],
  ]);
});

test('a signing key file others can read is refused; production needs a configured key', async () => {
  const key = path.join(dir, 'key.json');
  await writeFile(key, JSON.stringify(await generateSigningJwk()));
  await chmod(key, 0o644);
  const loose = await checkpointScript([], { ...env(), AUDIT_SIGNING_KEY_FILE: key });
  expect(loose.code).toBe(2);
  expect(loose.stderr).toMatch(/readable by others \(mode 644\): chmod 600/);

  const production = await checkpointScript([], { ...env(), NODE_ENV: 'production' });
  expect(production.code).toBe(2);
  expect(production.stderr).toMatch(/AUDIT_SIGNING_KEY_FILE: is required when NODE_ENV=production/);

  const fromEnv = await checkpointScript([], {
    ...env(),
    AUDIT_SIGNING_KEY: JSON.stringify(await generateSigningJwk()),
  });
  expect(fromEnv.code).toBe(0);
});

test('verification can start from a checkpoint, checking only the events after it', async () => {
  expect((await checkpointScript([], env())).code).toBe(0);
  await appendSamples(db.url, 5);
  const result = await verifyScript(['--from-checkpoint', 'latest'], env());
  expect(result.code).toBe(0);
  expect(result.stdout).toMatch(
    /^audit chain 1 \(tenant "acme"\) intact: 6 events \(seq 12\.\.17\), from the checkpoint at event 12/,
  );
  const missing = await verifyScript(['--from-checkpoint', '3'], env());
  expect(missing.code).toBe(2);
  expect(missing.stderr).toMatch(/no verified checkpoint at event 3/);
});
