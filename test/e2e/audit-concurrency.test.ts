// Many writers at once, and volume: the chain stays gapless and valid whatever the number
// of processes appending, and audit:verify streams it. The rates are printed, not asserted
// (this machine is shared); docs/audit.md records measured figures.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { appendBulk } from '../../packages/audit/test/support/events.ts';
import { runScript, verifyScript } from '../../packages/audit/test/support/run-script.ts';
import { createTestDatabase } from '../support/database.ts';
import { sql } from '../support/sql.ts';

let dataDir: string;
beforeAll(async () => {
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'mtg-audit-concurrency-'));
});
afterAll(async () => {
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

function report(line: string) {
  process.stderr.write(`\n[audit measurement] ${line}\n`);
}

test.each([
  ['each in its own transaction (BEGIN, append, COMMIT)', 'tx'],
  ['as single statements', 'auto'],
  ['on one pool per process (group commit)', 'pool'],
])(
  '4 writer processes with 2 connections each (8 at once), appending %s to one tenant, produce gapless, valid chains',
  async (how, mode) => {
    const db = await createTestDatabase();
    try {
      const processes = 4;
      const connections = 2;
      const perConnection = 250;
      const startAt = String(Date.now() + 1500);
      const results = await Promise.all(
        Array.from({ length: processes }, () =>
          runScript(
            'packages/audit/test/support/append-worker.ts',
            // Every connection of every process writes one tenant (and every 7th event is a
            // system event): eight writers contend for each chain.
            [db.url, String(connections), String(perConnection), startAt, mode, '1'],
            {},
          ),
        ),
      );
      for (const r of results) expect(r).toMatchObject({ code: 0 });
      const runs = results.map((r) => JSON.parse(r.stdout) as { events: number; ms: number });
      const total = runs.reduce((n, r) => n + r.events, 0);
      const slowest = Math.max(...runs.map((r) => r.ms));
      report(
        `append ${how}, ${processes} processes x ${connections} connections: ${total} events in ${Math.round(slowest)} ms = ${Math.round((total * 1000) / slowest)} events/s`,
      );

      const chains = await sql(
        db.url,
        `SELECT chain_id::int AS chain, count(*)::int AS n, min(seq)::int AS lo, max(seq)::int AS hi,
                count(DISTINCT seq)::int AS distinct FROM audit.events GROUP BY chain_id ORDER BY chain_id`,
      );
      // The system chain and the tenant's, each 1..n without a gap or a repeat. (The tenant's
      // chain id is whatever its sequence gave: racing first appends may each draw one.)
      expect(chains).toHaveLength(2);
      expect(chains[0].chain).toBe(0);
      expect(chains.reduce((n, c) => n + c.n, 0)).toBe(total);
      for (const c of chains) expect(c).toEqual({ ...c, lo: 1, hi: c.n, distinct: c.n });
      const verified = await verifyScript([], { DATABASE_URL: db.url, DATA_DIR: dataDir });
      expect(verified.code).toBe(0);
      expect(verified.stdout).toMatch(
        new RegExp(`^audit chains intact: ${total} events in 2 chains`),
      );
    } finally {
      await db.drop();
    }
  },
);

// About 35 s here, so not part of a plain `npm test`: it runs with the chaos suite's opt-in
// flag (CHAOS=1) or when a size is asked for (AUDIT_VOLUME=n).
const volumeTest = process.env.CHAOS === '1' || process.env.AUDIT_VOLUME ? test : test.skip;

volumeTest(
  'audit:verify streams a large chain and prints its rate',
  async () => {
    const db = await createTestDatabase();
    try {
      const count = Number(process.env.AUDIT_VOLUME ?? 100_000);
      const started = performance.now();
      await appendBulk(db.url, count);
      const appendMs = performance.now() - started;
      report(
        `bulk append (one session, 5000 per transaction): ${count} events in ${Math.round(appendMs)} ms = ${Math.round((count * 1000) / appendMs)} events/s`,
      );

      const verified = await verifyScript([], { DATABASE_URL: db.url, DATA_DIR: dataDir });
      expect(verified.code).toBe(0);
      expect(verified.stdout).toMatch(
        new RegExp(`^audit chain 1 \\(tenant "acme"\\) intact: ${count} events`),
      );
      report(`verify: ${verified.stdout.trim()}`);
    } finally {
      await db.drop();
    }
  },
  300_000,
);
