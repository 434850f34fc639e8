// DATABASE_READ_URL against a real hot standby the test makes (pg_basebackup -R -X stream,
// started on a port of its own): polls on every wire, result reads and lists are answered from
// the replica; a caller's own fresh start and cancel are still seen while the replica's replay
// is paused (read-your-writes, from the primary), while a task written straight to the primary
// meanwhile is not in the replica's list; a replica that stops answers nothing wrong and no 500.
import type http from 'node:http';
import pg from 'pg';
import { buildGateway, gatewayConfigSchema } from '@mtg/app-gateway';
import { createGatewayServer } from '../../apps/gateway/src/tls.ts';
import { parseConfig } from '@mtg/config';
import {
  createPool,
  createReadPreferringPool,
  dropLoginRoles,
  loginUrl,
  provisionLoginRoles,
  ROLES,
} from '@mtg/db';
import { createLogger } from '@mtg/log';
import { runScript } from '../../packages/audit/test/support/run-script.ts';
import { taskTimeline } from '../../apps/console/src/queries/task-timeline.ts';
import { newTaskId } from '@mtg/tasks';
import { adminDatabaseUrl } from '../support/database.ts';
import {
  onPort,
  standbyTools,
  startHotStandby,
  startOwnPrimary,
  whyNotReplicable,
  type PgServer,
} from '../support/hot-standby.ts';
import { sample, sampleBy } from '../support/metrics-sample.ts';
import { pollUntil } from '../support/poll.ts';
import { rpc2026 } from '../support/raw-2026.ts';
import { sql } from '../support/sql.ts';
import { freePort, startStack, type Stack } from '../support/stack.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';
import { coreWire, extWire, jobToolsWire, type Wire } from '../support/wires.ts';

const tools = await standbyTools();
const skipped = 'missing' in tools ? tools.missing : undefined;
if (skipped) process.stderr.write(`\nread-replica tests skipped: ${skipped}\n`);
const suite = skipped ? describe.skip : describe;

let primary: PgServer | undefined;
let adminUrl: string | undefined;
let standby: PgServer;
let stack: Stack;
let alice: string;
let wires: Wire[];
/** The relay the gateways reach the standby through (cut to make the replica go away). */
let relay: TcpProxy;
/** An auditor's login (a member of mtg_auditor only), on the primary; the replica has it too. */
let auditor: string;
/** A task started while the replica's replay was paused (the auditors' test). */
let fresh: string;
/** A second gateway replica on the same database and replica, as behind a load balancer. */
let other: { url: string; close(): Promise<void> };
/** The replica's copy of the stack's database, as its superuser. */
let replicaDb: string;

const reads = async (labels: Record<string, string>) =>
  sample(await (await fetch(`${stack.gatewayUrl}/metrics`)).text(), 'mtg_db_reads_total', labels) ??
  0;

/** The first gateway's reads the primary answered so far, by reason. */
const primaryReads = async () =>
  sampleBy(
    await (await fetch(`${stack.gatewayUrl}/metrics`)).text(),
    'mtg_db_reads_total',
    { target: 'primary' },
    'reason',
  );

/**
 * A read of `done` through `get`, as what an assertion needs to say what went wrong: whether
 * it showed the primary's 'moved later', and the primary's reads meanwhile by reason.
 */
const routed = async (get: () => Promise<unknown>) => {
  const before = await primaryReads();
  const movedLater = JSON.stringify(await get()).includes('moved later');
  const primary: Record<string, number> = {};
  for (const [reason, n] of await primaryReads())
    if (n > (before.get(reason) ?? 0)) primary[reason] = n - (before.get(reason) ?? 0);
  return { movedLater, primary };
};

const statusOn = async (url: string, id: string) =>
  (await sql(url, 'SELECT status FROM app.tasks WHERE id = $1', [id]))[0]?.status as
    string | undefined;

suite('read replica (DATABASE_READ_URL)', () => {
  beforeAll(async () => {
    if ('missing' in tools) return;
    // The test cluster when it lets us stream from it; else a primary of this test's own.
    const refused = await whyNotReplicable(tools, adminDatabaseUrl());
    if (refused) {
      primary = await startOwnPrimary(tools);
      // For startStack's database (restored after: later test files use the test cluster).
      adminUrl = process.env.TEST_ADMIN_DATABASE_URL;
      process.env.TEST_ADMIN_DATABASE_URL = primary.url;
      process.stderr.write(
        `\nread-replica: not streaming from the test cluster (${refused}): from a primary of the test's own\n`,
      );
    }
    // A generous bound: the replay stays paused for a while below, and must still be used.
    stack = await startStack({ workers: 1, env: { DATABASE_READ_MAX_LAG_MS: '300000' } });
    const login = {
      name: `${stack.db.name}_auditor`,
      password: 'auditor-' + newTaskId(),
      group: ROLES.auditor,
    };
    await provisionLoginRoles(stack.db.url, [login]);
    auditor = loginUrl(stack.db.url, login);
    standby = await startHotStandby(tools, primary?.url ?? adminDatabaseUrl());
    replicaDb = onPort(stack.db.url, standby.port).replace(/\/\/[^@]*@/, '//postgres@');
    relay = await startTcpProxy({ host: '127.0.0.1', port: standby.port });
    stack.env.DATABASE_READ_URL = relay.via(stack.db.logins.gateway);
    await stack.restartGateway();
    other = await secondGateway();
    alice = await stack.token('alice', 'acme');
    wires = [extWire(stack.mcpUrl), coreWire(stack.mcpUrl), jobToolsWire(stack.mcpUrl)];
    // In use once its staleness is measured.
    await pollUntil(
      async () =>
        sample(
          await (await fetch(`${stack.gatewayUrl}/metrics`)).text(),
          'mtg_db_replica_lag_seconds',
        ),
      (lag) => lag !== undefined && lag >= 0,
    );
  }, 120_000);

  afterAll(async () => {
    await other?.close();
    await stack?.close();
    await relay?.close();
    if (auditor && !primary)
      await dropLoginRoles(adminDatabaseUrl(), [decodeURIComponent(new URL(auditor).username)]);
    await standby?.stop();
    await primary?.stop();
    if (primary) process.env.TEST_ADMIN_DATABASE_URL = adminUrl;
  });

  let done: string;
  let direct: string;

  /**
   * Until the first gateway reads `done` from the paused replica: up, measured, within its bound
   * and past alice's writes. A read or check of it that failed (a loaded machine) marks it down
   * until the next check; the primary answers meanwhile, for that reason, and would show a write
   * made on the primary after this.
   */
  const replicaAnswers = () =>
    pollUntil(
      () => routed(() => extWire(stack.mcpUrl).get(alice, done)),
      (r) => Object.keys(r.primary).length === 0,
      60_000,
      100,
      'the first gateway to read the paused replica',
    );

  test('polls, result reads and lists are answered from the replica', async () => {
    done = await extWire(stack.mcpUrl).start(alice, 'generate_report', { report: 'r', rows: 1 });
    await pollUntil(
      () => statusOn(stack.db.url, done),
      (s) => s === 'completed',
    );
    await pollUntil(
      () => statusOn(replicaDb, done),
      (s) => s === 'completed',
    );
    await catchUp();
    await pauseReplay();
    await replicaAnswers();
    // Straight to the primary (as another writer would): the message changes there, and
    // alice gets a task the replica has not seen.
    await sql(
      stack.db.url,
      `UPDATE app.tasks SET status_message = 'moved on the primary' WHERE id = $1`,
      [done],
    );
    direct = await copyTask(done);

    const before = await reads({ target: 'replica' });
    for (const wire of wires) {
      const got = await wire.get(alice, done);
      expect(got).toMatchObject({ ok: true });
      expect(JSON.stringify(got)).not.toContain('moved on the primary');
      expect(JSON.stringify(got)).toContain('completed');
      // The result of a completed task (kept, not delete-on-read) comes from there too.
      const result = await wire.result(alice, done);
      expect(result).toMatchObject({ ok: true });
    }
    expect(await reads({ target: 'replica' })).toBeGreaterThanOrEqual(before + 2 * wires.length);
    // The lists are the replica's: the directly written task is not in them yet …
    for (const wire of [coreWire(stack.mcpUrl), jobToolsWire(stack.mcpUrl)]) {
      const listed = (await wire.list(alice))!;
      expect(listed).toContain(done);
      expect(listed).not.toContain(direct);
    }
    // … yet asking for it by id is never "not found": the primary is asked before saying so.
    const notFound = await reads({ target: 'primary', reason: 'not_found' });
    expect(await extWire(stack.mcpUrl).get(alice, direct)).toMatchObject({ ok: true });
    expect(await reads({ target: 'primary', reason: 'not_found' })).toBe(notFound + 1);
  });

  test("a caller's own start and cancel are seen at once while the replica lags behind", async () => {
    // No worker: the tasks stay queued, and the gateway settles the cancels itself.
    for (const w of stack.workers) await w.stop();
    await resumeReplay();
    const queued: string[] = [];
    for (const [i, wire] of wires.entries())
      queued.push(await wire.start(alice, 'generate_report', { report: `queued-${i}`, rows: 1 }));
    const across = await extWire(stack.mcpUrl).start(alice, 'generate_report', {
      report: 'across',
      rows: 1,
    });
    for (const id of [...queued, across])
      await pollUntil(
        () => statusOn(replicaDb, id),
        (s) => s === 'working',
      );
    await pauseReplay();
    const ownWrites = await reads({ target: 'primary', reason: 'own_write' });
    for (const [i, wire] of wires.entries()) {
      // A task the replica holds, as it was: cancelled now, the caller's next read says so.
      expect(await wire.cancel(alice, queued[i]!)).toMatchObject({ ok: true });
      expect(await statusOn(replicaDb, queued[i]!)).toBe('working');
      expect(JSON.stringify(await wire.get(alice, queued[i]!))).toContain('cancelled');
      // A task the replica has not seen at all.
      const id = await wire.start(alice, 'generate_report', { report: `fresh-${i}`, rows: 1 });
      expect(await statusOn(replicaDb, id)).toBeUndefined();
      const got = await wire.get(alice, id);
      expect(got).toMatchObject({ ok: true });
      expect(JSON.stringify(got)).toContain('working');
      const listed = await wire.list(alice);
      if (listed) expect(listed).toEqual(expect.arrayContaining([id, queued[i]!]));
    }
    expect(await reads({ target: 'primary', reason: 'own_write' })).toBeGreaterThan(ownWrites);
    // Cancelled through this gateway, polled through the other, which never saw alice write:
    // it heard of the settle (at its commit) and reads that task from the primary.
    expect(await extWire(stack.mcpUrl).cancel(alice, across)).toMatchObject({ ok: true });
    expect(await statusOn(replicaDb, across)).toBe('working');
    await pollUntil(
      async () => JSON.stringify(await extWire(other.url).get(alice, across)),
      (answer) => answer.includes('cancelled'),
      10_000,
    );
    // Replay resumes: the replica catches up and answers again, now with what it missed.
    await resumeReplay();
    await pollUntil(
      () => statusOn(replicaDb, direct),
      (s) => s === 'working' || s === 'completed',
    );
    const listed = await pollUntil(
      async () => (await coreWire(stack.mcpUrl).list(alice))!,
      (ids) => ids.includes(direct),
    );
    expect(listed).toContain(done);
  });

  test('a replica further behind than DATABASE_READ_MAX_LAG_MS: the primary answers', async () => {
    const strict = await secondGateway({ DATABASE_READ_MAX_LAG_MS: '500' });
    try {
      await catchUp();
      await pauseReplay();
      await replicaAnswers();
      await sql(stack.db.url, `UPDATE app.tasks SET status_message = 'moved later' WHERE id = $1`, [
        done,
      ]);
      // Within 300 s of staleness the replica still answers the first gateway …
      expect(await routed(() => extWire(stack.mcpUrl).get(alice, done))).toEqual({
        movedLater: false,
        primary: {},
      });
      // … while the one that accepts 500 ms has the primary answer once the replica is older.
      // The wait is for that answer; the bound only says when to give up.
      await pollUntil(
        async () => JSON.stringify(await extWire(strict.url).get(alice, done)),
        (answer) => answer.includes('moved later'),
        60_000,
        100,
        'the strict gateway to read the primary',
      );
      expect(await routed(() => extWire(stack.mcpUrl).get(alice, done))).toEqual({
        movedLater: false,
        primary: {},
      });
    } finally {
      await strict.close();
      await resumeReplay();
    }
    // A second gateway's start and a paused replica's replay take long on a loaded machine.
  }, 180_000);

  test('a replica that goes away: the primary answers every read, never a 500; then back', async () => {
    // Caught up with everything so far (alice's own writes included): alice reads the replica.
    await catchUp();
    await pauseReplay();
    const [{ status_message: replicaMessage }] = await sql(
      replicaDb,
      'SELECT status_message FROM app.tasks WHERE id = $1',
      [done],
    );
    await sql(stack.db.url, `UPDATE app.tasks SET status_message = 'moved again' WHERE id = $1`, [
      done,
    ]);
    const fallbacks = async () =>
      (await reads({ target: 'primary', reason: 'replica_failed' })) +
      (await reads({ target: 'primary', reason: 'replica_down' }));
    const before = await fallbacks();
    await relay.down();
    for (const wire of wires) {
      const got = await wire.get(alice, done);
      expect(got).toMatchObject({ ok: true });
      expect(JSON.stringify(got)).toContain('moved again');
    }
    expect((await coreWire(stack.mcpUrl).list(alice))!).toContain(direct);
    const raw = await rpc2026(
      stack.mcpUrl,
      alice,
      'tasks/get',
      { taskId: done },
      {
        tasksExtension: true,
      },
    );
    expect(raw.status).toBe(200);
    expect(raw.body.result.status).toBe('completed');
    expect(await fallbacks()).toBeGreaterThanOrEqual(before + wires.length);
    // Back: the replica (still paused, so still without the new message) answers again.
    await relay.up();
    await pollUntil(
      async () => JSON.stringify(await extWire(stack.mcpUrl).get(alice, done)),
      (answer) => !answer.includes('moved again') && answer.includes(replicaMessage),
      15_000,
    );
    await resumeReplay();
  });

  test("auditors read the replica: the console's queries and the audit CLI", async () => {
    const auditorPool = (url: string) =>
      createPool({ connectionString: url, role: ROLES.auditor, max: 2 });
    const pool = createReadPreferringPool({
      primary: auditorPool(auditor),
      replica: auditorPool(relay.via(auditor)),
      maxLagMs: 300_000,
    });
    try {
      // The pool answers from the replica (a read or check of it that failed marks it down
      // until the next check, and the primary would answer the next query).
      const poolOnReplica = () =>
        pollUntil(
          async () => (await pool.query('SELECT pg_is_in_recovery() AS standby')).rows[0].standby,
          (standby) => standby === true,
        );
      // In use once measured (as long as the replica streams, nothing is stale yet).
      await poolOnReplica();
      await pauseReplay();
      // A task the replica has not replayed: its task.created is on the primary only.
      fresh = await extWire(stack.mcpUrl).start(alice, 'generate_report', {
        report: 'audited',
        rows: 1,
      });
      await poolOnReplica();
      const scope = { tenant: 'acme' };
      // The console's timeline query is answered by the replica …
      expect(await taskTimeline(pool, scope, fresh)).toBeUndefined();
      expect(await taskTimeline(pool, scope, done)).toBeDefined();
      // … and with the replica gone, by the primary, with the fresh task's events.
      await relay.down();
      expect((await taskTimeline(pool, scope, fresh))?.map((e) => e.type)).toContain(
        'task.created',
      );
      await relay.up();
    } finally {
      await pool.end();
    }

    const cli = (extra: Record<string, string>) =>
      runScript('scripts/audit.ts', ['task', fresh, '--format', 'json'], {
        DATABASE_URL: auditor,
        DATA_DIR: standby.dir,
        ...extra,
      });
    // Behind what the primary had when the command began: the primary is read, nothing missed.
    const behind = await cli({
      DATABASE_READ_URL: relay.via(auditor),
      DATABASE_READ_MAX_LAG_MS: '300',
    });
    expect(behind.stderr).toMatch(/has not replayed up to .* reading the primary/);
    expect(behind.code).toBe(0);
    expect(JSON.parse(behind.stdout).map((e: { type: string }) => e.type)).toContain(
      'task.created',
    );
    await resumeReplay();
    const caughtUp = await cli({ DATABASE_READ_URL: relay.via(auditor) });
    expect(caughtUp.stderr).toMatch(/reading the replica/);
    expect(caughtUp.code).toBe(0);
    expect(caughtUp.stdout).toBe(behind.stdout);
    await relay.down();
    const unreachable = await cli({ DATABASE_READ_URL: relay.via(auditor) });
    expect(unreachable.stderr).toMatch(/unreachable .*reading the primary/);
    expect(unreachable.stdout).toBe(behind.stdout);
    await relay.up();
  });
});

/** Another gateway process's worth: its own pools, router and listener, the same env. */
async function secondGateway(
  env: Record<string, string> = {},
): Promise<{ url: string; close(): Promise<void> }> {
  const port = await freePort();
  const gateway = await buildGateway(
    parseConfig(gatewayConfigSchema, { ...stack.env, GATEWAY_PORT: String(port), ...env }),
    createLogger('test', { silent: !process.env.TEST_LOGS }),
    { registry: stack.registry },
  );
  const server: http.Server = createGatewayServer(gateway.app, gateway.tls);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    async close() {
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
      await gateway.close();
    },
  };
}

async function onStandby(text: string) {
  const c = new pg.Client({ connectionString: standby.url });
  await c.connect();
  try {
    return (await c.query(text)).rows;
  } finally {
    await c.end();
  }
}

async function pauseReplay() {
  await onStandby('SELECT pg_wal_replay_pause()');
  await pollUntil(
    async () => (await onStandby('SELECT pg_get_wal_replay_pause_state() AS s'))[0].s,
    (s) => s === 'paused',
  );
}

async function resumeReplay() {
  await onStandby('SELECT pg_wal_replay_resume()');
}

/** Until the standby has replayed all the primary has written so far. */
async function catchUp() {
  const [{ lsn }] = await sql(stack.db.url, 'SELECT pg_current_wal_lsn()::text AS lsn');
  await pollUntil(
    async () =>
      (await onStandby(`SELECT pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn AS done`))[0].done,
    (done) => done === true,
  );
}

/** A new task of the same owner, inserted on the primary directly (not through the gateway). */
async function copyTask(id: string): Promise<string> {
  const copy = newTaskId();
  const c = new pg.Client({ connectionString: stack.db.url });
  await c.connect();
  try {
    await c.query('CREATE TEMP TABLE copy AS SELECT * FROM app.tasks WHERE id = $1', [id]);
    await c.query(
      `UPDATE copy SET id = $1, dedupe_key = NULL, job_id = NULL, created_at = now(),
              status = 'working', ended_at = NULL, outcome = NULL, ended_by = NULL,
              started_at = NULL, lease_owner = NULL, status_message = 'queued'`,
      [copy],
    );
    await c.query('INSERT INTO app.tasks SELECT * FROM copy');
  } finally {
    await c.end();
  }
  return copy;
}
