import { Router, type Request, type Response } from 'express';
import type { Pool } from '@mtg/db';
import type { Logger } from '@mtg/log';
import { sendExport } from '../http/export.ts';
import { requireRole, sessionOf } from '../http/guards.ts';
import { html } from '../http/html.ts';
import { listQuery } from '../http/list-query.ts';
import { readMetrics, type Endpoint, type Sample } from '../queries/read-metrics.ts';
import {
  circuitsOf,
  readWorkerPools,
  slotsOf,
  type PoolsView,
  type QueueDepth,
  type WorkerPool,
} from '../queries/worker-pools.ts';
import { readUpstreamRefusals } from '../queries/upstream-refusals.ts';
import { exportLinks, layout } from '../pages/layout.ts';
import { table } from '../pages/table.ts';

/** One row per queue of the pools export: the pool serving it (none: unserved) and its depth. */
const POOL_COLUMNS = [
  'pool',
  'queue',
  'tool',
  'served',
  'queued',
  'running',
  'retry',
  'paused',
  'workers',
  'circuits',
] as const;

/**
 * Queues and workers: worker pools (the workers serving the same queues, WORKER_TOOLS) with
 * their queues' depth, their live workers and circuits, and the queues no live worker serves,
 * from the database; and the processes' Prometheus endpoints: cluster-wide figures (queue
 * depth, tasks by status) and per process (runs, slots, circuit breakers). They name no
 * tenant, so the page is for operators, who run the deployment.
 */
export function queueRoutes(deps: {
  /** Sessions as mtg_console: the queues summary views (app.console_*). */
  pool: Pool;
  logger: Logger;
  endpoints: readonly Endpoint[];
  token?: string;
  fetch?: typeof fetch;
}): Router {
  const router = Router();
  const read = () =>
    readMetrics(deps.endpoints, {
      ...(deps.token ? { token: deps.token } : {}),
      ...(deps.fetch ? { fetch: deps.fetch } : {}),
    });
  router.get(
    '/queues/pools',
    requireRole(deps.logger, ['operator']),
    async (req: Request, res: Response) => {
      const list = listQuery(req, res, deps.logger);
      if (!list) return;
      const view = await readWorkerPools(deps.pool, await read());
      // The export is the pools' list; its page is the queues page.
      if (!list.format) return res.redirect(303, '/queues#pools');
      return sendExport(res, list.format, 'pools', POOL_COLUMNS, poolRows(view));
    },
  );
  router.get(
    '/queues',
    requireRole(deps.logger, ['operator']),
    async (req: Request, res: Response) => {
      const list = listQuery(req, res, deps.logger);
      if (!list) return;
      const { format } = list;
      const readings = await read();
      const first = readings.find(
        (r) => r.ok && r.samples.some((s) => s.name === 'mtg_queue_jobs'),
      );
      const cluster = first?.ok ? first.samples : [];
      const rows = (name: string, label: string) =>
        cluster
          .filter((s) => s.name === name)
          .map((s) => ({ key: s.labels[label] ?? '', value: s.value }));
      const sum = (samples: Sample[], name: string) =>
        samples.filter((s) => s.name === name).reduce((n, s) => n + s.value, 0);
      const processes = readings.map((r) => ({
        process: r.endpoint.name,
        url: r.endpoint.url,
        state: r.ok ? 'up' : `unreachable (${r.error})`,
        runs: r.ok ? sum(r.samples, 'mtg_task_runs_total') : null,
        slots: r.ok ? slotsOf(r.samples) : '',
        // The pools' reading of the same samples, so a worker's breakers read the same in both
        // tables (downstream and upstream ones; none reported is all closed).
        circuits: r.ok ? circuitsOf(r.samples) : '',
      }));
      if (format) {
        // One row per figure: cluster-wide ones with process "cluster", then each process.
        const figures = [
          ...(
            ['mtg_queue_jobs', 'mtg_queue_depth', 'mtg_tasks', 'mtg_tasks_unserved'] as const
          ).flatMap((name) =>
            cluster
              .filter((s) => s.name === name)
              .map((s) => ({ process: 'cluster', metric: name, labels: s.labels, value: s.value })),
          ),
          ...processes.map((p) => ({
            process: p.process,
            metric: 'state',
            labels: {
              url: p.url,
              runs: String(p.runs ?? ''),
              slots: p.slots,
              circuits: p.circuits,
            },
            value: p.state,
          })),
        ];
        return sendExport(res, format, 'queues', ['process', 'metric', 'labels', 'value'], figures);
      }
      const kv = [
        { key: 'key' as const, label: 'State' },
        { key: 'value' as const, label: 'Count' },
      ];
      const [pools, refusals] = await Promise.all([
        readWorkerPools(deps.pool, readings),
        readUpstreamRefusals(deps.pool),
      ]);
      const body = html`<p>Cluster-wide figures (every tenant).</p>
        <h2 id="pools">Worker pools</h2>
        <p>
          A pool is the workers serving the same queues (the same <code>WORKER_TOOLS</code>): live
          workers as they announce themselves, depth from the tasks table, slots and circuits from
          each worker's metrics endpoint when <code>CONSOLE_METRICS_URLS</code> lists it.
        </p>
        ${poolsHtml(pools)} ${exportLinks('/queues/pools', {})}
        <h2>From the metrics endpoints</h2>
        <div class="cols">
          <div>
            <h2>Queue</h2>
            <div id="queue-jobs">${table(kv, rows('mtg_queue_jobs', 'state'), 'No metrics.')}</div>
          </div>
          <div>
            <h2>Tasks by status</h2>
            <div id="task-statuses">${table(kv, rows('mtg_tasks', 'status'), 'No metrics.')}</div>
          </div>
          <div>
            <h2>Queued, no worker serves the tool</h2>
            ${table(
              [
                { key: 'key' as const, label: 'Tool' },
                { key: 'value' as const, label: 'Tasks' },
              ],
              rows('mtg_tasks_unserved', 'tool'),
              'None.',
            )}
          </div>
        </div>
        <h2>Per queue (one per long tool: a worker pool serves its tools' queues)</h2>
        <div id="queue-depth">
          ${table(
            [
              { key: 'tool', label: 'Tool' },
              { key: 'queue', label: 'Queue' },
              { key: 'queued', label: 'Queued' },
              { key: 'active', label: 'Running' },
            ],
            perQueue(cluster),
            'No per-queue metrics.',
          )}
        </div>
        ${exportLinks('/queues', {})}
        <h2 id="upstream-refusals">Upstream tools not served</h2>
        <p>
          Tools an upstream's latest listing named that the gateway refused, each on its own (the
          upstream's other tools are served): a name reserved for a gateway tool, past the
          upstream's <code>maxTools</code>, an invalid or repeated name, or a name another upstream
          serves.
        </p>
        <div id="upstream-refused-tools">
          ${table(
            [
              { key: 'upstream', label: 'Upstream' },
              { key: 'upstreamName', label: 'Upstream tool' },
              { key: 'name', label: 'Would be served as' },
              { key: 'reason', label: 'Reason' },
              { key: 'refusedAt', label: 'Listed' },
            ],
            refusals,
            'None: every listed tool is served.',
          )}
        </div>
        <h2>Processes</h2>
        <div id="processes">
          ${table(
            [
              { key: 'process', label: 'Process' },
              { key: 'url', label: 'Metrics' },
              { key: 'state', label: 'State' },
              { key: 'runs', label: 'Task runs' },
              { key: 'slots', label: 'Slots busy/total' },
              { key: 'circuits', label: 'Circuit breakers' },
            ],
            processes,
          )}
        </div>`;
      res.type('html').send(layout('Queues and workers', sessionOf(res), body));
    },
  );
  return router;
}

/** mtg_queue_depth{tool,queue,state} as one row per queue. */
function perQueue(samples: Sample[]) {
  const byQueue = new Map<
    string,
    { tool: string; queue: string; queued: number; active: number }
  >();
  for (const s of samples) {
    if (s.name !== 'mtg_queue_depth') continue;
    const queue = s.labels.queue ?? '';
    const row = byQueue.get(queue) ?? { tool: s.labels.tool ?? '', queue, queued: 0, active: 0 };
    if (s.labels.state === 'queued') row.queued = s.value;
    if (s.labels.state === 'active') row.active = s.value;
    byQueue.set(queue, row);
  }
  return [...byQueue.values()];
}

const DEPTH_COLUMNS = [
  { key: 'tool' as const, label: 'Tool' },
  { key: 'queue' as const, label: 'Queue' },
  { key: 'queued' as const, label: 'Queued' },
  { key: 'running' as const, label: 'Running' },
  { key: 'retry' as const, label: 'Retry' },
  { key: 'paused' as const, label: 'Paused' },
];

/** Each pool's queues and workers, then the queues nobody serves, flagged. */
function poolsHtml(view: PoolsView) {
  const pool = (p: WorkerPool) =>
    html`<section class="pool" data-pool="${p.name}">
      <h3>${p.name} · ${p.workers.length} live worker${p.workers.length === 1 ? '' : 's'}</h3>
      ${table(DEPTH_COLUMNS, p.queues)}
      ${table(
        [
          { key: 'id', label: 'Worker' },
          { key: 'address', label: 'Metrics at' },
          { key: 'startedAt', label: 'Started' },
          { key: 'seenAgoS', label: 'Last heartbeat', cell: (w) => `${w.seenAgoS} s ago` },
          { key: 'running', label: 'Running tasks' },
          { key: 'slots', label: 'Slots busy/total' },
          { key: 'circuits', label: 'Circuit breakers' },
        ],
        p.workers,
      )}
    </section>`;
  const unserved = view.unserved;
  return html`<div id="unserved-queues">
      ${
        unserved.length
          ? html`<h3>Queues no live worker serves</h3>
              <p class="bad">
                Work in these queues will not run until a worker serving its tool starts.
              </p>
              <div class="unserved">${table(DEPTH_COLUMNS, unserved)}</div>`
          : html`<p class="empty">Every queue has a live worker.</p>`
      }
    </div>
    <div id="worker-pools">
      ${view.pools.length ? view.pools.map(pool) : html`<p class="bad">No live worker.</p>`}
    </div>`;
}

/** The pools export: one row per queue, the pool serving it or none. */
function poolRows(view: PoolsView): Array<Record<(typeof POOL_COLUMNS)[number], unknown>> {
  const row = (pool: WorkerPool | undefined, q: QueueDepth) => ({
    pool: pool?.name ?? '',
    queue: q.queue,
    tool: q.tool,
    served: pool !== undefined,
    queued: q.queued,
    running: q.running,
    retry: q.retry,
    paused: q.paused,
    workers: pool ? pool.workers.map((w) => w.id).join(' ') : '',
    circuits: pool
      ? pool.workers
          .filter((w) => w.circuits)
          .map((w) => `${w.id}: ${w.circuits}`)
          .join('; ')
      : '',
  });
  return [
    ...view.pools.flatMap((p) => p.queues.map((q) => row(p, q))),
    ...view.unserved.map((q) => row(undefined, q)),
  ];
}
