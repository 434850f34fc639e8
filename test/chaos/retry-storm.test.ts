// Chaos (d): a retry storm. 1,000 identical starts from 50 concurrent clients must make
// exactly one task; every client gets that task back.
import { rpc } from '../../scripts/bench/lib/mcp.ts';
import { percentile } from '../../scripts/bench/lib/stats.ts';
import { sql } from '../support/sql.ts';
import { chaosDescribe } from './support/gate.ts';
import { chaosStack } from './support/stack.ts';

const STARTS = 1000;
const CLIENTS = 50;

chaosDescribe('retry storm', () => {
  const chaos = chaosStack({
    workers: 1,
    env: { DEMO_STEP_MS: '200' },
  });

  test.each([
    ['derived key (same arguments)', undefined],
    ['explicit idempotency key', 'storm-key-1'],
  ])(
    `${STARTS} identical starts from ${CLIENTS} concurrent clients, %s → exactly one task`,
    async (label, key) => {
      const token = await chaos.stack.token(`storm-${key ?? 'derived'}`, 'storm');
      const args = { collection: 'storm', count: 2000, patch: { storm: true } };
      const params = {
        name: 'bulk_update_records',
        arguments: args,
        ...(key ? { _meta: { 'io.mcp-task-gateway/idempotency-key': key } } : {}),
      };
      const ids = new Map<string, number>();
      const latencies: number[] = [];
      const failures: string[] = [];
      let next = 0;
      const started = performance.now();
      await Promise.all(
        Array.from({ length: CLIENTS }, async () => {
          while (next < STARTS) {
            next++;
            try {
              const r = await rpc(chaos.stack.mcpUrl, token, 'tools/call', params);
              latencies.push(r.ms);
              const id = r.body?.result?.taskId;
              if (typeof id === 'string') ids.set(id, (ids.get(id) ?? 0) + 1);
              else failures.push(`HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
            } catch (error) {
              failures.push(String(error));
            }
          }
        }),
      );
      const elapsed = (performance.now() - started) / 1000;
      const [taskId] = [...ids.keys()];
      const tasks = await sql(
        chaos.db.url,
        `SELECT id FROM app.tasks WHERE tenant = 'storm' AND subject = $1`,
        [`storm-${key ?? 'derived'}`],
      );
      const events = await sql<{ type: string; n: number }>(
        chaos.db.url,
        `SELECT type, count(*)::int AS n FROM audit.events WHERE task_id = $1 AND type IN ('task.created', 'task.deduplicated') GROUP BY type`,
        [taskId],
      );
      const jobs = await sql(
        chaos.db.url,
        `SELECT id FROM pgboss.job WHERE name LIKE 'tool.%' AND data ->> 'taskId' = $1`,
        [taskId],
      );
      process.stderr.write(
        `chaos (d) ${label}: ${latencies.length} starts in ${elapsed.toFixed(1)} s (${(latencies.length / elapsed).toFixed(0)}/s), ` +
          `latency p50 ${percentile(latencies, 50).toFixed(0)} ms, p99 ${percentile(latencies, 99).toFixed(0)} ms, max ${Math.max(...latencies).toFixed(0)} ms; ` +
          `${ids.size} distinct task ids; events ${JSON.stringify(Object.fromEntries(events.map((e) => [e.type, e.n])))}\n`,
      );
      expect(failures.slice(0, 5)).toEqual([]);
      expect(ids.size).toBe(1);
      expect(ids.get(taskId!)).toBe(STARTS);
      expect(tasks).toHaveLength(1);
      expect(jobs).toHaveLength(1);
      expect(Object.fromEntries(events.map((e) => [e.type, e.n]))).toEqual({
        'task.created': 1,
        'task.deduplicated': STARTS - 1,
      });
    },
    240_000,
  );
});
