// Chaos (a): 50 tasks, 3 worker processes, one SIGKILLed every ~3 s and started again, until
// every task has ended. Nothing may be lost and nothing done twice. Also measures how long a
// killed worker's tasks wait before another worker takes them over.
import { startTask } from '../../scripts/bench/lib/mcp.ts';
import { percentile } from '../../scripts/bench/lib/stats.ts';
import { sql } from '../support/sql.ts';
import { sleep } from './support/clients.ts';
import { chaosDescribe } from './support/gate.ts';
import { chaosStack } from './support/stack.ts';
import { batchesOf, chainProblems, checkIntegrity, expectIntact } from './support/integrity.ts';

const TASKS = 50;
const WORKERS = 3;

chaosDescribe('SIGKILLed workers', () => {
  const chaos = chaosStack({
    workers: WORKERS,
    // Default worker settings (20 tasks at once each, 4 s lease): a survivor always has a
    // free slot, so the takeover time measures failover, not queueing.
    env: { DEMO_STEP_MS: '200' },
    gatewayEnv: { MAX_ACTIVE_TASKS_PER_USER: '100' },
  });

  test(`${TASKS} tasks through a SIGKILL every ~3 s: all complete, no step twice, every write once; takeover time measured`, async () => {
    const tokens = await Promise.all(
      Array.from({ length: 5 }, (_, i) => chaos.stack.token(`chaos-${i}`, 'chaos')),
    );
    const expected = new Map<string, number>();
    for (let i = 0; i < TASKS; i++) {
      const count = 8000 + (i % 8) * 1000; // 16–30 batches of 200 ms
      const id = await startTask(
        chaos.stack.mcpUrl,
        tokens[i % tokens.length]!,
        'bulk_update_records',
        {
          collection: `chaos-${i}`,
          count,
          patch: { i },
        },
      );
      expected.set(id, batchesOf(count));
    }

    const kills: Array<{ worker: string; at: Date; tasks: string[] }> = [];
    const deadline = Date.now() + 240_000;
    for (;;) {
      const [{ open }] = (await sql(
        chaos.db.url,
        `SELECT count(*)::int AS open FROM app.tasks WHERE status IN ('working', 'input_required')`,
      )) as [{ open: number }];
      if (open === 0 || Date.now() > deadline) break;
      await sleep(2500 + Math.random() * 1000);
      const live = [...chaos.stack.workers.entries()].filter(([, p]) => p.running());
      if (live.length === 0) continue;
      const [worker, proc] = live[Math.floor(Math.random() * live.length)]!;
      const held = await sql<{ id: string }>(
        chaos.db.url,
        `SELECT id FROM app.tasks WHERE lease_owner = $1 AND lease_expires_at > now() AND status = 'working'`,
        [worker],
      );
      const [{ at }] = (await sql(chaos.db.url, 'SELECT clock_timestamp() AS at')) as [
        { at: Date },
      ];
      proc.kill('SIGKILL');
      await proc.exited;
      kills.push({ worker, at, tasks: held.map((t) => t.id) });
      // Back at once (the launcher would wait 1 s): it starts in the background meanwhile.
      void chaos.stack.startWorker(worker).catch(() => {});
    }

    // Takeover: from the kill to the next task.lease_taken event of each task it held.
    const takeovers: number[] = [];
    let notTaken = 0;
    for (const k of kills) {
      for (const taskId of k.tasks) {
        const [row] = await sql<{ ms: number | null }>(
          chaos.db.url,
          `SELECT extract(epoch FROM min(occurred_at) - $2::timestamptz) * 1000 AS ms FROM audit.events
            WHERE task_id = $1 AND type = 'task.lease_taken' AND occurred_at > $2`,
          [taskId, k.at],
        );
        if (row?.ms == null) notTaken++;
        else takeovers.push(Number(row.ms));
      }
    }
    const integrity = await checkIntegrity(chaos.db.url, expected);
    const chain = await chainProblems(chaos.db.url);
    process.stderr.write(
      `chaos (a): ${kills.length} SIGKILLs hitting ${kills.reduce((a, k) => a + k.tasks.length, 0)} running tasks; ` +
        `SIGKILL → resumed elsewhere: p50 ${percentile(takeovers, 50).toFixed(0)} ms, p99 ${percentile(takeovers, 99).toFixed(0)} ms, ` +
        `max ${Math.max(...takeovers).toFixed(0)} ms over ${takeovers.length} takeovers` +
        `${notTaken ? ` (${notTaken} held tasks were finished before anyone needed to take them over)` : ''}\n`,
    );
    expect(kills.length).toBeGreaterThanOrEqual(3);
    expectIntact('chaos (a)', integrity);
    expect(chain).toEqual([]);
    expect(takeovers.length).toBeGreaterThan(0);
    expect(Math.max(...takeovers)).toBeLessThan(30_000);
  }, 330_000);
});
