// npm run evidence: only into a development chain unless asked, only in synthetic tenants of
// its own, and a report that states its period and chain range with excerpts in seq order.
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { runScript } from '../../packages/audit/test/support/run-script.ts';
import { bySeq } from '../../apps/cli/src/evidence/run-scope.ts';
import { createTestDatabase } from '../support/database.ts';
import { sql } from '../support/sql.ts';
import { startStack, type Stack } from '../support/stack.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'mtg-evidence-'));
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('it refuses a database other than the development stack, and writes nothing', async () => {
  const db = await createTestDatabase();
  try {
    const out = path.join(dir, 'refused');
    const r = await runScript('scripts/evidence.ts', ['--out', out], {
      DATABASE_URL: db.url,
      DATA_DIR: path.join(dir, 'data-refused'),
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /not the development stack's embedded database.*--allow-external-database/,
    );
    expect(await sql(db.url, 'SELECT count(*)::int AS n FROM audit.events')).toEqual([{ n: 0 }]);
    await expect(stat(out)).rejects.toMatchObject({ code: 'ENOENT' });
  } finally {
    await db.drop();
  }
});

test('excerpts are put in chain order', () => {
  expect(bySeq([{ seq: 9 }, { seq: '3' }, { seq: 12 }]).map((r) => Number(r.seq))).toEqual([
    3, 9, 12,
  ]);
  // Events of two chains: by time first (each chain has seqs of its own).
  const at = (ms: number) => new Date(ms);
  expect(
    bySeq([
      { seq: 1, occurred_at: at(3000) },
      { seq: 7, occurred_at: at(1000) },
      { seq: 2, occurred_at: at(2000) },
    ]).map((r) => r.seq),
  ).toEqual([7, 2, 1]);
});

describe('with --allow-external-database against a running stack', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      workers: 1,
      env: { DEMO_STEP_MS: '100', AUTH_CLOCK_TOLERANCE_SECONDS: '1' },
    });
  });
  afterAll(async () => {
    await stack?.close();
  });

  test('every event it causes is in its synthetic tenants, and the report states period and chain range', async () => {
    const data = path.join(dir, 'data');
    await mkdir(data, { recursive: true });
    await writeFile(path.join(data, 'dev-secrets.json'), JSON.stringify(stack.secrets));
    const before = (
      await sql(stack.db.url, 'SELECT coalesce(max(seq), 0)::int AS n FROM audit.events')
    )[0].n;
    const out = path.join(dir, 'report');
    const r = await runScript('scripts/evidence.ts', ['--out', out, '--allow-external-database'], {
      DATABASE_URL: stack.db.url,
      DATA_DIR: data,
      GATEWAY_RESOURCE: stack.mcpUrl,
      IDP_ISSUER: stack.issuer,
      DOWNSTREAM_URL: stack.downstreamUrl,
      AUTH_CLOCK_TOLERANCE_SECONDS: '1',
    });
    const report = JSON.parse(await readFile(path.join(out, 'report.json'), 'utf8'));
    const written = await sql(
      stack.db.url,
      'SELECT DISTINCT tenant FROM audit.events WHERE seq > $1 AND tenant IS NOT NULL',
      [before],
    );
    expect(written.length).toBeGreaterThan(0);
    for (const w of written) expect(report.coverage.syntheticTenants).toContain(w.tenant);
    expect(written.every((w) => /^synthetic-/.test(w.tenant))).toBe(true);
    expect(report.coverage.chainRange.firstSeq).toBe(before + 1);
    // Each tenant has a chain of its own: the pass's events are its synthetic tenants' chains,
    // the rest of the range is other traffic meanwhile.
    const [own] = await sql(
      stack.db.url,
      `SELECT count(*)::int AS n FROM audit.events WHERE tenant LIKE 'synthetic-%'`,
    );
    expect(report.coverage.events.synthetic).toBe(own.n);
    expect(report.coverage.events.other).toBe(
      report.coverage.chainRange.lastSeq - before - report.coverage.events.synthetic,
    );
    // Excerpts in the order the events happened: by time, then seq.
    for (const check of report.checks) {
      const order = check.audit.map((e: { seq: number; occurred_at: string }) => [
        Date.parse(e.occurred_at),
        Number(e.seq),
      ]);
      expect(order).toEqual(
        [...order].sort((a: number[], b: number[]) => a[0]! - b[0]! || a[1]! - b[1]!),
      );
    }
    const md = await readFile(path.join(out, 'report.md'), 'utf8');
    expect(md).toMatch(
      /Period: \S+ to \S+\. Chain range: events \d+\.\.\d+ — \d+ of them the pass's own, in its synthetic tenants `synthetic-/,
    );
    expect(r.stderr).not.toMatch(/ERROR/);
  }, 180_000);
});
