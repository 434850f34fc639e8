// Checkpoints never sign what a failover can lose. With asynchronous replication the last
// commits may exist on the primary only; a checkpoint signing them, then a failover, and the
// verifier reports a cut tail no one made. With AUDIT_CHECKPOINT_STANDBYS=1 the signer waits
// until a streaming standby has flushed the heads it read, and signs nothing while none has.
// A Patroni cluster with asynchronous replication, its standby made to lag by stopping its
// WAL receiver. (Synchronous replication: database-failover.test.ts signs with the same
// setting before every failover, at no wait.)
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { appendAuditGrouped } from '@mtg/audit';
import { prepareExisting } from '../../scripts/bench/lib/database.ts';
import { startPatroniCluster, type PatroniCluster } from '../support/patroni-cluster.ts';
import { sql } from '../support/sql.ts';
import { auditCli } from './support/audit-cli.ts';
import { waitFor } from './support/clients.ts';
import { haDescribe } from './support/ha-gate.ts';

const describeHa = await haDescribe('checkpoint-replication');

describeHa('checkpoints under asynchronous replication', () => {
  let cluster: PatroniCluster;
  let dir: string;
  beforeAll(async () => {
    cluster = await startPatroniCluster({ synchronous: false });
    await cluster.healthy();
    await prepareExisting(cluster.url);
    dir = mkdtempSync(path.join(os.tmpdir(), 'mtg-ha-ckpt-'));
  }, 180_000);
  afterAll(async () => {
    await cluster?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  test('a lagging standby: the signer refuses to sign heads no standby has, and signs once one has them', async () => {
    const pool = new pg.Pool({ connectionString: cluster.url, max: 2 });
    pool.on('error', () => {});
    const append = (n: number, tag: string) =>
      Promise.all(
        Array.from({ length: n }, (_, i) =>
          appendAuditGrouped(pool, {
            type: 'task.step_completed',
            taskId: 'c'.repeat(32),
            tenant: 'ckpt',
            correlationId: `${tag}-${i}`,
            data: { step: `${tag}:${i}` },
          }),
        ),
      );
    const standbyConfirmed = { AUDIT_CHECKPOINT_STANDBYS: '1' };
    try {
      await append(5, 'before');
      const first = await auditCli(['audit', 'checkpoint'], cluster.url, dir, standbyConfirmed);
      expect({ code: first.code, out: first.code ? first.out.slice(0, 500) : '' }).toEqual({
        code: 0,
        out: '',
      });

      const leader = await cluster.leader();
      const replica = cluster.nodes.find((n) => n !== leader)!;
      const receiver = await waitFor(
        () => cluster.walReceiverPid(replica),
        (pid) => pid !== undefined,
        20_000,
        200,
        "the replica's WAL receiver",
      );
      process.kill(receiver!, 'SIGSTOP');
      try {
        // Committed on the primary (asynchronous: no standby needed), flushed by none.
        await append(5, 'lagging');
        const checkpoints = async () =>
          (
            await sql<{ n: number }>(
              cluster.url,
              'SELECT count(*)::int AS n FROM audit.checkpoints',
            )
          )[0]!.n;
        const stored = await checkpoints();
        const refused = await auditCli(['audit', 'checkpoint'], cluster.url, dir, {
          ...standbyConfirmed,
          AUDIT_CHECKPOINT_STANDBY_WAIT_MS: '1500',
        });
        expect({
          code: refused.code,
          said: /refusing to sign: 0 of the 1 standby/.test(refused.out),
        }).toEqual({
          code: 1,
          said: true,
        });
        expect(await checkpoints()).toBe(stored);
      } finally {
        process.kill(receiver!, 'SIGCONT');
      }
      // The standby catches up: the same heads sign.
      const signed = await auditCli(['audit', 'checkpoint'], cluster.url, dir, {
        ...standbyConfirmed,
        AUDIT_CHECKPOINT_STANDBY_WAIT_MS: '20000',
      });
      expect({ code: signed.code, out: signed.code ? signed.out.slice(0, 500) : '' }).toEqual({
        code: 0,
        out: '',
      });
      expect((await auditCli(['audit', 'verify'], cluster.url, dir)).code).toBe(0);
    } finally {
      await pool.end();
    }
  }, 120_000);

  test('an asynchronous failover loses the last commits: a checkpoint signed on the primary alone then reports a cut no one made', async () => {
    const pool = new pg.Pool({ connectionString: cluster.url, max: 2 });
    pool.on('error', () => {});
    const file = path.join(dir, 'checkpoints.jsonl');
    try {
      const leader = await cluster.leader();
      const replica = cluster.nodes.find((n) => n !== leader)!;
      await cluster.healthy();
      const receiver = await waitFor(
        () => cluster.walReceiverPid(replica),
        (pid) => pid !== undefined,
        20_000,
        200,
        "the replica's WAL receiver",
      );
      process.kill(receiver!, 'SIGSTOP');
      // Acknowledged by the primary, on no standby; signed without waiting for one.
      for (let i = 0; i < 5; i++)
        await appendAuditGrouped(pool, {
          type: 'task.step_completed',
          taskId: 'd'.repeat(32),
          tenant: 'ckpt',
          correlationId: `doomed-${i}`,
          data: { step: `doomed:${i}` },
        });
      const unsafe = await auditCli(['audit', 'checkpoint', '--out', file], cluster.url, dir);
      expect(unsafe.code).toBe(0);
      // The primary dies; what its standby had not received goes with it (the receiver's
      // socket buffer too).
      await cluster.killLeader();
      process.kill(receiver!, 'SIGKILL');
      const promoted = await cluster.leader(90_000);
      expect(promoted.name).toBe(replica.name);
      await waitFor(
        () => sql<{ r: boolean }>(cluster.url, 'SELECT pg_is_in_recovery() AS r').catch(() => []),
        (r) => r[0]?.r === false,
        30_000,
        200,
        'the promoted node answering through the router',
      );
      const survived = await sql<{ n: number }>(
        cluster.url,
        `SELECT count(*)::int AS n FROM audit.events WHERE body::jsonb ->> 'correlationId' LIKE 'doomed-%'`,
      );
      process.stderr.write(
        `checkpoint-replication: ${survived[0]!.n} of 5 acknowledged events survived the asynchronous failover\n`,
      );
      expect(survived[0]!.n).toBeLessThan(5);
      // The checkpoint kept outside the database signed heads that are gone: the verifier
      // reports a cut tail that no one made. (AUDIT_CHECKPOINT_STANDBYS=1 would not have
      // signed them: the first test.)
      const verify = await auditCli(['audit', 'verify', '--checkpoints', file], cluster.url, dir);
      expect({ code: verify.code, cut: /gone|cut|attests/.test(verify.out) }).toEqual({
        code: 1,
        cut: true,
      });
    } finally {
      await pool.end();
    }
  }, 180_000);
});
