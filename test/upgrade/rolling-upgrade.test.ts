// A rolling upgrade from the previous release with work in flight, as an operator does it
// (docs/operations.md, "Upgrading"): the stack runs the previous release (a worktree of this
// repository at its tag, with its own node_modules); long tasks run on every wire; then the
// new release's migrations against the same database, then the gateway, then the workers one
// at a time. Every task must complete once, no step may be journaled twice, the audit chain
// must verify, and no worker may run a task created under a schema it does not serve: the
// pack's staged_echo changes its input schema between the two (test/fixtures/packs).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { dropLoginRoles, loginUrl, provisionLoginRoles, ROLES, type LoginRole } from '@mtg/db';
import { startProcessStack, type ProcessStack } from '../../scripts/bench/lib/process-stack.ts';
import { batchesOf, chainProblems, checkIntegrity } from '../chaos/support/integrity.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { pollUntil } from '../support/poll.ts';
import { sql } from '../support/sql.ts';
import { coreWire, extWire, jobToolsWire, type Answer, type Wire } from '../support/wires.ts';
import {
  checkOutPreviousRelease,
  gitUnavailable,
  PREVIOUS_RELEASE,
  type PreviousRelease,
} from './support/previous-release.ts';

const exec = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PACK = 'test/fixtures/packs/changed-schema.ts';
const TOOL_PACKS = `@mtg/demo-tools,./${PACK}`;
const STEP_MS = 250;

const skipReason = gitUnavailable();
if (skipReason) {
  process.stderr.write(`rolling-upgrade: SKIPPED: ${skipReason}; the test needs git\n`);
}
const describeWithGit = skipReason ? describe.skip : describe;

interface Started {
  id: string;
  wire: Wire;
  token: string;
  tool: 'bulk_update_records' | 'staged_echo';
  batches: number;
  wave: string;
}

describeWithGit(`rolling upgrade from ${PREVIOUS_RELEASE.tag}`, () => {
  let previous: PreviousRelease;
  let db: TestDatabase;
  let logins: LoginRole[] = [];
  let stack: ProcessStack;
  let tmp: string;
  const timings: Record<string, number> = {};

  // Which release each worker runs, for the fingerprint check at the end.
  const workerRelease = new Map<string, 'old' | 'new'>();
  const oldEnv = () => ({ FIXTURE_SCHEMA: 'v1' });
  const newEnv = () => ({ FIXTURE_SCHEMA: 'v2' });

  beforeAll(async () => {
    previous = await checkOutPreviousRelease();
    timings.npmCiMs = previous.npmCiMs;
    // The team's pack at its old version sits beside the old release.
    await copyFile(path.join(ROOT, PACK), path.join(previous.root, PACK));
    tmp = await mkdtemp(path.join(os.tmpdir(), 'mtg-upgrade-'));

    // The database as the previous release left it: its own migrate command.
    db = await createTestDatabase({ migrate: false });
    await exec(process.execPath, ['scripts/migrate.ts'], {
      cwd: previous.root,
      env: { PATH: process.env.PATH, DATABASE_URL: db.url, TOOL_PACKS, ...oldEnv() },
    });
    // A login per process, named after this database (roles are cluster-wide).
    const services = ['gateway', 'worker', 'downstream'] as const;
    logins = services.map((s) => ({
      name: `${db.name}_${s}`,
      password: randomBytes(18).toString('base64url'),
      group: ROLES[s],
    }));
    await provisionLoginRoles(db.url, logins);
    const [gateway, worker, downstream] = logins.map((l) => loginUrl(db.url, l));

    // One dev IdP and downstream (this tree's) for both releases.
    stack = await startProcessStack({
      databaseUrl: db.url,
      databaseUrls: { gateway: gateway!, worker: worker!, downstream: downstream! },
      gateways: 0,
      gatewaySlots: 1,
      workers: 0,
      env: {
        DEMO_STEP_MS: String(STEP_MS),
        LOG_LEVEL: 'warn',
        TOOL_PACKS,
        FIXTURE_GATE_FILE: path.join(tmp, 'gate'),
      },
    });
    await stack.startGateway(0, oldEnv(), previous.root);
    for (const id of ['old-worker-1', 'old-worker-2']) {
      await stack.startWorker(id, oldEnv(), previous.root);
      workerRelease.set(id, 'old');
    }
  }, 300_000);

  afterAll(async () => {
    await stack?.stop();
    await db?.drop();
    if (logins.length) {
      await dropLoginRoles(
        process.env.TEST_ADMIN_DATABASE_URL!,
        logins.map((l) => l.name),
      );
    }
    await previous?.remove();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  }, 120_000);

  test('tasks on every wire complete once through migrations, the gateway and each worker replaced; no worker runs a task of another schema', async () => {
    const t0 = Date.now();
    const wires = [extWire(stack.mcpUrl), coreWire(stack.mcpUrl), jobToolsWire(stack.mcpUrl)];
    const tokens = await Promise.all(wires.map((_, i) => stack.token(`upgrader-${i}`, 'acme')));
    const started: Started[] = [];
    const start = async (
      wave: string,
      wireIndex: number,
      tool: Started['tool'],
      args: Record<string, unknown>,
      batches: number,
    ) => {
      const wire = wires[wireIndex]!;
      const token = tokens[wireIndex]!;
      const id = await wire.start(token, tool, args);
      const s = { id, wire, token, tool, batches, wave };
      started.push(s);
      return s;
    };
    const bulkWave = (wave: string, batches: number) =>
      Promise.all(
        wires.map((_, i) =>
          start(
            wave,
            i,
            'bulk_update_records',
            { collection: `${wave}-${i}`, count: batches * 500, patch: { wave } },
            batches,
          ),
        ),
      );
    const task = (id: string) =>
      sql<{
        status: string;
        lease_owner: string | null;
        attempts: number;
        tool_fingerprint: string;
      }>(
        db.url,
        `SELECT status, lease_owner, attempts, tool_fingerprint FROM app.tasks WHERE id = $1`,
        [id],
      ).then((r) => r[0]!);
    const stepsOf = async (ids: string[]) =>
      (
        await sql<{ n: number }>(
          db.url,
          `SELECT count(*)::int AS n FROM app.task_steps WHERE task_id = ANY($1)`,
          [ids],
        )
      )[0]!.n;
    const claimers = async (id: string) =>
      (
        await sql<{ worker: string }>(
          db.url,
          `SELECT body::jsonb -> 'data' ->> 'worker' AS worker FROM audit.events
            WHERE task_id = $1 AND type IN ('task.started', 'task.lease_taken') ORDER BY seq`,
          [id],
        )
      ).map((r) => r.worker);
    const mark = (label: string) => (timings[label] = Date.now() - t0);

    // 1. On the previous release: long tasks on every wire, and a staged_echo (v1) held open.
    const waveA = await bulkWave('a', 24);
    const held = await start('a', 1, 'staged_echo', { text: 'old', stages: 2, hold: true }, 0);
    await pollUntil(
      async () => Promise.all([...waveA, held].map((s) => task(s.id))),
      (rows) => rows.every((r) => r.lease_owner !== null),
      30_000,
      100,
      'wave a running on the old workers',
    );
    mark('waveARunning');

    // 2. The new release's migrations, against the database the old release is running on:
    // first the dry run (what would apply), then migrate, then status.
    const dryRun = await exec(process.execPath, ['scripts/migrate.ts', '--dry-run'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, DATABASE_URL: db.url },
    });
    const pending = /migration\(s\) pending(?: \((.*)\))?$/m.exec(dryRun.stdout)?.[1] ?? 'none';
    const migrateRun = await exec(process.execPath, ['scripts/migrate.ts'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, DATABASE_URL: db.url, TOOL_PACKS, ...newEnv() },
    });
    const status = await exec(process.execPath, ['scripts/migrate.ts', 'status'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, DATABASE_URL: db.url },
    });
    expect(status.stdout).toMatch(
      /applied \(checksum ok (\d+), changed 0, unrecorded 0\), 0 pending/,
    );
    mark('migrated');
    // The old release keeps working on the newer schema: its gateway takes new tasks, its
    // workers go on journaling steps.
    const stepsAtMigration = await stepsOf(waveA.map((s) => s.id));
    // Long enough to be in flight when the workers are replaced.
    const waveB = await bulkWave('b', 40);
    await pollUntil(
      () => stepsOf(waveA.map((s) => s.id)),
      (n) => n > stepsAtMigration + 3,
      30_000,
      100,
      'the old workers journaling steps after the migration',
    );

    // 3. The gateway: the old one stops (draining its requests), the new one starts.
    const oldGatewayExit = await stack.gateways[0]!.stop();
    await stack.startGateway(0, newEnv());
    mark('gatewayReplaced');
    const waveC = await bulkWave('c', 16);
    const fresh = await start('c', 0, 'staged_echo', { text: 'new', stages: 3, shout: true }, 0);
    // The old workers take the new gateway's demo tasks (same schema) but not the staged_echo
    // created at the new schema: it waits on a queue no old worker polls.
    await pollUntil(
      async () => Promise.all(waveC.map((s) => task(s.id))),
      (rows) => rows.every((r) => r.attempts > 0),
      30_000,
      100,
      'wave c claimed by the old workers',
    );
    expect(await task(fresh.id)).toMatchObject({ status: 'working', attempts: 0 });
    expect((await task(fresh.id)).tool_fingerprint).not.toBe(
      (await task(held.id)).tool_fingerprint,
    );

    // 4. The workers, one at a time: SIGTERM an old one (it releases what it runs at the next
    // step boundary), start a new one.
    const workerExits: Record<string, string> = {};
    const replace = async (oldId: string, newId: string) => {
      const exit = await stack.workers.get(oldId)!.stop();
      workerExits[oldId] = String(exit.signal ?? exit.code);
      await stack.startWorker(newId, newEnv());
      workerRelease.set(newId, 'new');
    };
    await replace('old-worker-1', 'new-worker-1');
    mark('worker1Replaced');
    await pollUntil(
      () => task(fresh.id),
      (t) => t.status === 'completed',
      30_000,
      100,
      'the new-schema staged_echo run by the new worker',
    );
    const waveD = await bulkWave('d', 12);
    // The held task is in flight on the last old worker (handed over if old-worker-1 had it).
    await pollUntil(
      () => task(held.id),
      (t) => t.lease_owner === 'old-worker-2',
      30_000,
      100,
      'the held task running on old-worker-2',
    );
    await replace('old-worker-2', 'new-worker-2');
    mark('worker2Replaced');

    // 5. The held task was created at the old schema: the new workers finish everything else
    // and still never take it.
    const others = started.filter((s) => s.tool === 'bulk_update_records').map((s) => s.id);
    await pollUntil(
      async () => Promise.all(others.map(task)),
      (rows) => rows.every((r) => r.status === 'completed'),
      90_000,
      200,
      'every demo task completed',
    );
    mark('demoTasksCompleted');
    const strandedRow = await task(held.id);
    expect(strandedRow).toMatchObject({ status: 'working', lease_owner: null });
    expect((await claimers(held.id)).every((w) => workerRelease.get(w) === 'old')).toBe(true);

    // 6. The documented way out: a worker of the old release for that tool drains it.
    await stack.startWorker(
      'old-drain',
      { ...oldEnv(), WORKER_TOOLS: 'staged_echo' },
      previous.root,
    );
    workerRelease.set('old-drain', 'old');
    await pollUntil(
      () => claimers(held.id),
      (w) => w.at(-1) === 'old-drain',
      30_000,
      100,
      'the old-release drain worker taking the held task',
    );
    await writeFile(path.join(tmp, 'gate'), 'open');
    await pollUntil(
      () => task(held.id),
      (t) => t.status === 'completed',
      30_000,
      100,
      'the held task completed by the drain worker',
    );
    await stack.workers.get('old-drain')!.stop();
    mark('drained');

    // Every client sees its task completed, on the wire it started it on.
    for (const s of started) {
      const answer: Answer = await s.wire.result(s.token, s.id);
      expect(answer.ok).toBe(true);
    }

    // Integrity: journal, audit and downstream writes of the demo tasks (one per batch).
    const bulk = started.filter((s) => s.tool === 'bulk_update_records');
    const integrity = await checkIntegrity(
      db.url,
      new Map(bulk.map((s) => [s.id, batchesOf(s.batches * 500)])),
    );
    expect(integrity.problems).toEqual([]);
    let writes = 0;
    for (const s of bulk) {
      const landed = (await (
        await fetch(`${stack.downstreamUrl}/_writes?taskId=${s.id}`)
      ).json()) as Array<{ idempotencyKey: string }>;
      expect(new Set(landed.map((w) => w.idempotencyKey)).size).toBe(s.batches);
      writes += landed.length;
    }
    // staged_echo: each journaled step completed once in the trail.
    for (const s of started.filter((x) => x.tool === 'staged_echo')) {
      const [r] = await sql<{ journal: number; events: number; distinct_events: number }>(
        db.url,
        `SELECT (SELECT count(*)::int FROM app.task_steps WHERE task_id = $1) AS journal,
                count(*)::int AS events, count(DISTINCT body::jsonb -> 'data' ->> 'step')::int AS distinct_events
           FROM audit.events WHERE task_id = $1 AND type = 'task.step_completed'`,
        [s.id],
      );
      expect(r).toMatchObject({ events: r!.journal, distinct_events: r!.journal });
    }
    // No worker ever claimed a task of the other schema.
    const fingerprintOf = {
      old: strandedRow.tool_fingerprint,
      new: (await task(fresh.id)).tool_fingerprint,
    };
    for (const s of started.filter((x) => x.tool === 'staged_echo')) {
      const fp = (await task(s.id)).tool_fingerprint;
      const release = fp === fingerprintOf.old ? 'old' : 'new';
      for (const w of await claimers(s.id))
        expect(`${w}:${workerRelease.get(w)}`).toBe(`${w}:${release}`);
    }

    // The audit chain verifies, with the new release's own command.
    const verify = await exec(process.execPath, ['scripts/audit-verify.ts'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, DATABASE_URL: db.url, DATA_DIR: tmp },
    });
    expect(await chainProblems(db.url)).toEqual([]);

    const counts = await sql<{ type: string; n: number }>(
      db.url,
      `SELECT type, count(*)::int AS n FROM audit.events WHERE task_id = ANY($1) GROUP BY type ORDER BY type`,
      [started.map((s) => s.id)],
    );
    // Work really was in flight across the swaps: tasks an old worker started that a new
    // one finished (the fingerprints of the unchanged tools agree across the releases).
    const crossed: string[] = [];
    for (const s of bulk) {
      const releases = new Set((await claimers(s.id)).map((w) => workerRelease.get(w)));
      if (releases.has('old') && releases.has('new')) crossed.push(s.wave);
    }
    expect(crossed.length).toBeGreaterThan(0);
    expect(crossed.some((w) => w === 'a' || w === 'b')).toBe(true); // made by the old gateway
    const recorded = migrateRun.stdout.split('\n').filter((l) => l.startsWith('checksum recorded'));
    const perWire = wires.map((w) => `${w.name}: ${started.filter((s) => s.wire === w).length}`);
    process.stderr.write(
      [
        `rolling upgrade ${PREVIOUS_RELEASE.tag} (${previous.commit.slice(0, 7)}) → this tree:`,
        `  npm ci in the old worktree ${timings.npmCiMs} ms; timeline (ms from the first task) ${JSON.stringify(
          Object.fromEntries(Object.entries(timings).filter(([k]) => k !== 'npmCiMs')),
        )}`,
        `  migrate: pending before (dry run): ${pending}; checksums recorded for ${recorded.length} migration(s) applied by ${PREVIOUS_RELEASE.tag}; ${migrateRun.stdout.trim().split('\n').at(-1)}`,
        `  handed from an old worker to a new one: ${crossed.length} task(s) (waves ${[...new Set(crossed)].join(', ')})`,
        `  tasks per wire: ${perWire.join('; ')} (${bulk.length} bulk_update_records, ${started.length - bulk.length} staged_echo); waves a ${waveA.length}, b ${waveB.length}, c ${waveC.length + 1}, d ${waveD.length}`,
        `  completions: ${started.length}/${started.length}; steps journaled: ${await stepsOf(started.map((s) => s.id))}; downstream writes: ${writes} (${bulk.reduce((a, s) => a + s.batches, 0)} batches)`,
        `  audit events: ${counts.map((c) => `${c.type} ${c.n}`).join(', ')}`,
        `  exits: old gateway ${oldGatewayExit.signal ?? oldGatewayExit.code}, ${Object.entries(
          workerExits,
        )
          .map(([w, e]) => `${w} ${e}`)
          .join(', ')}; audit:verify: ${verify.stdout.trim().split('\n')[0]}`,
        '',
      ].join('\n'),
    );
  }, 200_000);
});
