import { Gauge, type Registry } from 'prom-client';
import type { Queryable } from '@mtg/db';
import { TASK_STATUSES } from '@mtg/tool-kit';

/**
 * Cluster-wide gauges, read from PostgreSQL when scraped (at most once per `cacheMs`, so
 * several scrapers cost one query): tasks by status, and the depth of the pg-boss task queue.
 * Every process that registers them reports the same numbers: aggregate with max(), not sum().
 */
export function registerClusterGauges(
  registry: Registry,
  deps: {
    db: Queryable;
    queueDepth: () => Promise<{ queued: number; active: number }>;
    /** Queued tasks per tool that no live worker serves (gateway only). */
    unservedTasks?: () => Promise<Array<{ tool: string; count: number }>>;
    cacheMs?: number;
  },
): void {
  const cacheMs = deps.cacheMs ?? 5000;
  // Elapsed time (performance.now(), which starts near 0): never read is stale.
  let tasksAt = -Infinity;
  let tasks: Map<string, number> = new Map();
  let queueAt = -Infinity;
  let queue = { queued: 0, active: 0 };

  new Gauge({
    name: 'mtg_tasks',
    help: 'Tasks retained in the database, by status (cluster-wide)',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      if (performance.now() - tasksAt >= cacheMs) {
        // The statuses are few and the table is bounded by retention: one grouped count.
        const r = await deps.db.query<{ status: string; n: number }>(
          'SELECT status, count(*)::int AS n FROM app.tasks GROUP BY status',
        );
        tasks = new Map(r.rows.map((row) => [row.status, row.n]));
        tasksAt = performance.now();
      }
      for (const status of TASK_STATUSES) this.set({ status }, tasks.get(status) ?? 0);
    },
  });

  new Gauge({
    name: 'mtg_queue_jobs',
    help: 'Jobs of the pg-boss task queue: queued (waiting for a worker) and active (cluster-wide)',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      if (performance.now() - queueAt >= cacheMs) {
        queue = await deps.queueDepth();
        queueAt = performance.now();
      }
      this.set({ state: 'queued' }, queue.queued);
      this.set({ state: 'active' }, queue.active);
    },
  });

  const unserved = deps.unservedTasks;
  if (unserved) {
    let unservedAt = -Infinity;
    let counts: Array<{ tool: string; count: number }> = [];
    new Gauge({
      name: 'mtg_tasks_unserved',
      help: 'Queued tasks whose tool no live worker serves, by tool (cluster-wide)',
      labelNames: ['tool'],
      registers: [registry],
      async collect() {
        if (performance.now() - unservedAt >= cacheMs) {
          counts = await unserved();
          unservedAt = performance.now();
        }
        this.reset();
        for (const { tool, count } of counts) this.set({ tool }, count);
      },
    });
  }
}
