// Chaos (c): PostgreSQL goes away mid-run, twice: a clean fast shutdown and an immediate one
// (crash recovery at the next start). An embedded cluster of its own, so the machine's server
// is left alone. Nobody restarts the gateway or the workers: they must recover by themselves,
// finish every task, and leave an intact audit chain with no event lost or duplicated.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '@mtg/dev-postgres';
import { prepareExisting } from '../../scripts/bench/lib/database.ts';
import { startTask } from '../../scripts/bench/lib/mcp.ts';
import { startProcessStack, type ProcessStack } from '../../scripts/bench/lib/process-stack.ts';
import { auditVerify, auditVerifyAvailable } from '../../scripts/bench/benches/audit.ts';
import { sql } from '../support/sql.ts';
import { pollToEnd, sleep, waitFor } from './support/clients.ts';
import { chaosDescribe } from './support/gate.ts';
import { batchesOf, chainProblems, checkIntegrity, expectIntact } from './support/integrity.ts';

chaosDescribe('PostgreSQL restarts', () => {
  let dir: string;
  let postgres: EmbeddedPostgres;
  let stack: ProcessStack;
  let gateway: ProcessStack['gateways'][number];
  const start = (port?: number) =>
    startEmbeddedPostgres({ dataDir: path.join(dir, 'cluster'), ...(port ? { port } : {}) });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'mtg-chaos-pg-'));
    chmodSync(dir, 0o755); // as root the server runs as the OS user postgres, which must enter it
    postgres = await start();
    const databaseUrls = await prepareExisting(postgres.url);
    stack = await startProcessStack({
      databaseUrl: postgres.url,
      databaseUrls,
      workers: 2,
      env: { DEMO_STEP_MS: '200' },
      gatewayEnv: { MAX_ACTIVE_TASKS_PER_USER: '100' },
      keepLogs: process.env.CHAOS_KEEP_LOGS === '1',
      // As `npm start` does: a worker that exits is started again (after 1 s).
      superviseWorkers: true,
    });
    gateway = stack.gateways[0]!;
  }, 180_000);
  afterAll(async () => {
    await stack?.stop();
    await postgres?.stop().catch(() => {});
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  test('a fast and an immediate restart mid-run: tasks continue without operator action, the audit chain verifies, no event lost or doubled', async () => {
    const token = await stack.token('pg-chaos', 'pg');
    const expected = new Map<string, number>();
    for (let i = 0; i < 16; i++) {
      const count = 5000 + (i % 4) * 2500; // 10–25 batches
      const id = await startTask(stack.mcpUrl, token, 'bulk_update_records', {
        collection: `pg-${i}`,
        count,
        patch: { i },
      });
      expected.set(id, batchesOf(count));
    }
    const polling = [...expected.keys()].map((id) =>
      pollToEnd(() => stack.mcpUrl, token, id, {
        everyMs: 200,
        timeoutMs: Number(process.env.CHAOS_PG_WAIT_MS ?? 150_000),
      }),
    );

    const outages: string[] = [];
    // 1. Fast shutdown (what a managed database's restart or failover looks like to clients).
    await sleep(1500);
    const port = postgres.port;
    let t0 = Date.now();
    await postgres.stop();
    await sleep(3000);
    postgres = await start(port);
    outages.push(`fast shutdown: down ${Date.now() - t0} ms`);
    // 2. Immediate shutdown: no checkpoint, crash recovery at the next start.
    await sleep(2000);
    t0 = Date.now();
    process.kill(postgres.pid, 'SIGQUIT');
    await postgres.exited;
    await postgres.stop().catch(() => {}); // releases the cluster lock
    await sleep(2000);
    postgres = await start(port);
    outages.push(`immediate shutdown: down ${Date.now() - t0} ms`);

    const logs = await Promise.all(polling);
    const crashes = stack.crashes.map(
      (c) =>
        `${c.worker} exited (${c.exit.signal ?? c.exit.code}): ${
          c.logTail
            .split('\n')
            .map((l) => l.replace(/^\s*\|\s*/, ''))
            .find((l) => /^(error|Error)\b.*: /.test(l) && !/Unhandled/.test(l)) ?? 'see its log'
        }`,
    );
    // New work is accepted again.
    const after = await startTask(stack.mcpUrl, token, 'bulk_update_records', {
      collection: 'pg-after',
      count: 1000,
      patch: { after: true },
    });
    expected.set(after, batchesOf(1000));
    await waitFor(
      () => sql(postgres.url, `SELECT status FROM app.tasks WHERE id = $1`, [after]),
      (r) => r[0]?.status !== 'working',
      60_000,
    );

    const statuses: Record<string, number> = {};
    for (const l of logs)
      for (const e of l.serverErrors) statuses[e.status] = (statuses[e.status] ?? 0) + 1;
    process.stderr.write(
      `chaos (c): logs in ${stack.dataDir}/logs; ${outages.join('; ')}; gateway ${gateway.running() ? 'up throughout' : 'DIED'}, worker exits restarted by the supervisor: ${crashes.length ? crashes.join('; ') : 'none'}; clients saw ` +
        `${logs.reduce((a, l) => a + l.networkErrors.length, 0)} network errors, 5xx by status ${JSON.stringify(statuses)}, ` +
        `${logs.reduce((a, l) => a + l.rpcErrors.length, 0)} JSON-RPC errors ${JSON.stringify([...new Set(logs.flatMap((l) => l.rpcErrors.map((e) => e.error)))].slice(0, 3))}; ` +
        `final ${JSON.stringify(logs.map((l) => l.finalStatus ?? 'still polling'))}\n`,
    );
    expect(gateway.running()).toBe(true);
    // An outage is answered 503 + Retry-After, never 500.
    expect(Object.keys(statuses).filter((s) => s !== '503')).toEqual([]);
    expect(logs.map((l) => l.finalStatus)).toEqual(logs.map(() => 'completed'));
    const integrity = await checkIntegrity(postgres.url, expected);
    for (const c of stack.crashes)
      integrity.known.push({
        bug: 'worker-crash-on-db-restart',
        detail: `${c.worker} exited (${c.exit.signal ?? c.exit.code})`,
      });
    expectIntact('chaos (c)', integrity);
    expect(await chainProblems(postgres.url)).toEqual([]);
    if (auditVerifyAvailable()) {
      const verify = await auditVerify(postgres.url);
      process.stderr.write(
        `chaos (c): audit:verify exit ${verify.code}: ${verify.report ? `${verify.report.events} events` : verify.output}\n`,
      );
      expect(verify.code).toBe(0);
    }
  }, 300_000);
});
