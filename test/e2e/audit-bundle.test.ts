// Evidence bundles and the auditor CLI, through the real scripts: a bundle of a task, of a
// tenant's month, of the whole trail; verified offline (no database) against the checkpoint
// key; one byte edited and the event named; audit:verify's warning for an uncovered head.
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { appendAuditInTransaction, type AuditEvent } from '@mtg/audit';
import {
  checkpointScript,
  runScript,
  verifyScript,
} from '../../packages/audit/test/support/run-script.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { sql } from '../support/sql.ts';

let db: TestDatabase;
let dir: string;
const TASK = 'a'.repeat(32);

const event = (e: Partial<AuditEvent> & Pick<AuditEvent, 'type'>): AuditEvent => ({
  client: 'mcp-agent',
  tool: 'generate_report',
  ...e,
});

async function append(events: AuditEvent[]) {
  const client = new pg.Client({ connectionString: db.url, options: '-c role=mtg_gateway' });
  await client.connect();
  try {
    for (const e of events) await appendAuditInTransaction(client, e); // autocommit: each its own
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  db = await createTestDatabase();
  dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-audit-bundle-'));
  await append([
    event({
      type: 'task.created',
      taskId: TASK,
      tenant: 'acme',
      subject: 'nia',
      data: { note: 'Zoë – Q3' },
    }),
    event({ type: 'task.created', taskId: 'b'.repeat(32), tenant: 'globex', subject: 'gus' }),
    event({
      type: 'task.started',
      taskId: TASK,
      tenant: 'acme',
      subject: 'nia',
      actor: { subject: 'worker-1', kind: 'worker' },
    }),
    event({
      type: 'task.denied',
      taskId: TASK,
      tenant: 'acme',
      subject: 'eve',
      reason: 'not_owner',
      data: { verb: 'get' },
    }),
    event({ type: 'auth.denied', tenant: 'globex', subject: 'gus', reason: 'insufficient_scope' }),
    event({
      type: 'task.completed',
      taskId: TASK,
      tenant: 'acme',
      subject: 'nia',
      reason: 'success',
    }),
  ]);
});
afterAll(async () => {
  await db?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const env = () => ({ DATABASE_URL: db.url, DATA_DIR: path.join(dir, 'data') });
const jwks = () => path.join(dir, 'data', 'audit', 'jwks.json');
const audit = (args: string[], extra: Record<string, string> = {}) =>
  runScript('scripts/audit.ts', args, { ...env(), ...extra });
// Offline: no DATABASE_URL, and a DATA_DIR with no database in it.
const verifyOffline = (file: string) =>
  verifyScript(['--bundle', file, '--keys', jwks()], { DATA_DIR: path.join(dir, 'nothing') });

test('audit:verify warns, and says how to fix it, when no signed checkpoint covers the head', async () => {
  const before = await verifyScript([], env());
  expect(before.code).toBe(0);
  // acme's events are chain 1, globex's chain 2.
  expect(before.stdout).toMatch(/^audit chains intact: 6 events in 2 chains/);
  expect(before.stderr).toMatch(
    /warning: no signed checkpoint covers chain 1 \(tenant "acme"\) \(events 1\.\.4\); no signed checkpoint covers chain 2 \(tenant "globex"\) \(events 1\.\.2\).*truncated tail.*npm run -s audit:checkpoint/,
  );

  expect((await checkpointScript([], env())).code).toBe(0);
  const covered = await verifyScript([], env());
  expect(covered.code).toBe(0);
  expect(covered.stderr).toBe('');

  await append([event({ type: 'task.status_read', taskId: TASK, tenant: 'acme', subject: 'nia' })]);
  const behind = await verifyScript(['--json'], env());
  expect(behind.code).toBe(0);
  expect(behind.stderr).toMatch(
    /no signed checkpoint covers the head of chain 1 \(tenant "acme"\): events 5\.\.5 come after the latest checkpoint \(event 4\)/,
  );
  expect(JSON.parse(behind.stdout).warnings).toHaveLength(1);
  expect((await checkpointScript([], env())).code).toBe(0);
});

test("a task's bundle verifies offline; it holds its tenant's chain only, nothing of other tenants", async () => {
  const file = path.join(dir, 'task.json');
  const made = await audit(['bundle', '--task', TASK, '--tenant', 'acme', '--out', file]);
  expect(made.stderr).toMatch(/bundle of 5 selected event\(s\), chain runs 1:1\.\.5/);
  expect(made.code).toBe(0);
  const bundle = JSON.parse(await readFile(file, 'utf8'));
  expect(
    bundle.events.map((e: { seq: number; redacted?: boolean; selected?: boolean }) => [
      e.seq,
      e.redacted ? 'redacted' : e.selected,
    ]),
  ).toEqual([
    [1, true],
    [2, true],
    [3, true],
    [4, true],
    [5, true],
  ]);
  expect(bundle.chains).toEqual([{ chain: 1, tenant: 'acme', firstSeq: 1, lastSeq: 5 }]);
  // globex's chain is in the checkpoint as its head alone.
  expect(bundle.checkpoint.heads).toEqual([
    expect.objectContaining({ chain: 1, seq: 5 }),
    expect.objectContaining({ chain: 2, seq: 2 }),
  ]);
  // Nothing of globex or its user: read with the checkpoint's signed payload in place of its
  // JWS, whose base64url key id and signature may spell any three letters by chance.
  const signed = Buffer.from(bundle.checkpoint.jws.split('.')[1], 'base64url').toString();
  const readable = JSON.stringify({ ...bundle, checkpoint: { ...bundle.checkpoint, jws: signed } });
  expect(readable).not.toContain('gus');
  expect(readable).not.toContain('globex');
  const verified = await verifyOffline(file);
  expect(verified.stdout).toMatch(
    /verified: events 1\.\.5 of chain 1 \(tenant acme\), period \S+ \.\. \S+, up to the checkpoint signed \S+ by key \S+; 5 selected, 5 recomputed, 0 of other tenants redacted/,
  );
  expect(verified.code).toBe(0);
});

const has = (tool: string) => {
  try {
    execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

// The independent check of docs/audit.md, run as printed there (when python3 and jq exist).
(has('python3') && has('jq') ? test : test.skip)(
  "docs/audit.md's Python and sha256sum checks agree with the bundle, and catch the edit",
  async () => {
    const docs = await readFile(new URL('../../docs/audit.md', import.meta.url), 'utf8');
    const python = /```python\n(# check-bundle\.py[\s\S]*?)```/.exec(docs)![1]!;
    const script = path.join(dir, 'check-bundle.py');
    await writeFile(script, python);
    const file = path.join(dir, 'task.json');
    expect(execFileSync('python3', [script, file], { encoding: 'utf8' })).toMatch(
      /^chain 1: events 1\.\.5 intact up to the checkpoint of \S+\n$/,
    );
    const bundle = JSON.parse(await readFile(file, 'utf8'));
    const jq = `jq -j '.events[0] | "\\(.chain)\\n\\(.seq)\\n\\(.occurredAt)\\n\\(.type)\\n\\(.prevHash)\\n\\(.body)"' ${file} | sha256sum`;
    expect(docs).toContain(jq.replace(file, 'task.json'));
    expect(execFileSync('sh', ['-c', jq], { encoding: 'utf8' }).split(' ')[0]).toBe(
      bundle.events[0].hash,
    );
    const edited = path.join(dir, 'edited-py.json');
    await writeFile(edited, (await readFile(file, 'utf8')).replace('– Q3', '– Q4'));
    expect(() => execFileSync('python3', [script, edited], { stdio: 'pipe' })).toThrow(
      /event 1 of chain 1 was modified/,
    );
  },
);

test('one byte edited in an exported bundle: --bundle names the event', async () => {
  const file = path.join(dir, 'task.json');
  const original = await readFile(file, 'utf8');
  // One byte: "Q3" becomes "Q4" in event 1's body (matched with its prefix, so never inside a
  // hash or the signature, whose base64 may hold "Q3" too).
  const edited = original.replace('– Q3', '– Q4');
  expect(Buffer.compare(Buffer.from(edited), Buffer.from(original))).not.toBe(0);
  expect(Buffer.byteLength(edited)).toBe(Buffer.byteLength(original));
  expect(edited).not.toBe(original);
  await writeFile(path.join(dir, 'edited.json'), edited);
  const r = await verifyOffline(path.join(dir, 'edited.json'));
  expect(r.code).toBe(1);
  expect(r.stdout).toMatch(
    /BROKEN at event 1 \(modified\) in chain 1: event 1 \(task\.created\) of chain 1 was modified/,
  );

  // The last event taken out (its chain's run with it): the run no longer ends at the head
  // the checkpoint signs.
  const b = JSON.parse(original);
  const cut = { ...b, events: b.events.slice(0, -1), chains: [{ ...b.chains[0], lastSeq: 4 }] };
  await writeFile(path.join(dir, 'cut.json'), JSON.stringify(cut));
  const shortened = await verifyOffline(path.join(dir, 'cut.json'));
  expect(shortened.code).toBe(1);
  expect(shortened.stdout).toMatch(/BROKEN at event 4 \(checkpoint_mismatch\) in chain 1/);

  // The checkpoint's signature is checked against the key given.
  // One character in the middle of the signature (the last ones may be padding bits only).
  const jws: string = b.checkpoint.jws;
  const at = jws.length - 20;
  b.checkpoint.jws = jws.slice(0, at) + (jws[at] === 'A' ? 'B' : 'A') + jws.slice(at + 1);
  await writeFile(path.join(dir, 'resigned.json'), JSON.stringify(b));
  const resigned = await verifyOffline(path.join(dir, 'resigned.json'));
  expect(resigned.code).toBe(1);
  expect(resigned.stdout).toMatch(/\(bad_checkpoint\)/);
});

test('a whole month of the trail: every event in full, verified without the database', async () => {
  const month = new Date().toISOString().slice(0, 7);
  const made = await audit(['bundle', '--month', month]);
  expect(made.code).toBe(0);
  const file = path.join(dir, 'month.json');
  await writeFile(file, made.stdout);
  const bundle = JSON.parse(made.stdout);
  expect(bundle.period).not.toBeNull();
  expect(bundle.events.every((e: { selected?: boolean }) => e.selected === true)).toBe(true);
  const r = await verifyOffline(file);
  expect(r.stdout).toMatch(
    /verified: events 1\.\.5 of chain 1 \(tenant acme\), events 1\.\.2 of chain 2 \(tenant globex\).*7 selected, 7 recomputed, 0 of other tenants redacted/,
  );
  expect(r.code).toBe(0);
});

test('the auditor CLI: a task, denials and a principal, as table, CSV and JSON', async () => {
  const task = await audit(['task', TASK, '--format', 'json']);
  expect(task.code).toBe(0);
  const events = await sql(
    db.url,
    `SELECT seq::int, type FROM audit.events WHERE task_id = $1 ORDER BY seq`,
    [TASK],
  );
  expect(
    JSON.parse(task.stdout).map((e: { seq: number; type: string }) => ({
      seq: e.seq,
      type: e.type,
    })),
  ).toEqual(events);

  const table = await audit(['task', TASK]);
  expect(table.stdout.split('\n')[0]).toMatch(/^seq\s+occurred_at\s+type/);
  expect(table.stdout).toMatch(/\(5 rows\)/);

  const denials = await audit(['denials', '--since', '7d', '--format', 'csv']);
  expect(denials.code).toBe(0);
  const lines = denials.stdout.trim().split('\r\n');
  expect(lines[0]).toBe(
    'seq,occurred_at,type,tenant,reason,subject,client,tool,verb,task_id,client_ip',
  );
  expect(
    lines.slice(1).map((l) =>
      l
        .split(',')
        .slice(0, 6)
        .filter((_, i) => i !== 1),
    ),
  ).toEqual([
    // In the order they happened; each seq is its tenant's chain's.
    ['3', 'task.denied', 'acme', 'not_owner', 'eve'],
    ['2', 'auth.denied', 'globex', 'insufficient_scope', 'gus'],
  ]);
  const acmeOnly = await audit(['denials', '--tenant', 'acme', '--format', 'json']);
  expect(JSON.parse(acmeOnly.stdout).map((d: { seq: number }) => d.seq)).toEqual([3]);

  const principal = await audit(['principal', 'worker-1', '--format', 'json']);
  expect(JSON.parse(principal.stdout)).toEqual([
    expect.objectContaining({ seq: 2, role: 'actor', type: 'task.started' }),
  ]);

  const unknown = await audit(['task', 'f'.repeat(32)]);
  expect(unknown.code).toBe(1);
  const bad = await audit(['denials', '--since', 'yesterday']);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toMatch(/--since takes 24h, 7d/);
});
