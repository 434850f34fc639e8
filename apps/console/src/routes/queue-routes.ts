import { Router, type Request, type Response } from 'express';
import type { Logger } from '@mtg/log';
import { exportFormatOf, sendExport } from '../http/export.ts';
import { refuse, requireRole, sessionOf } from '../http/guards.ts';
import { html } from '../http/html.ts';
import { readMetrics, type Endpoint, type Sample } from '../queries/read-metrics.ts';
import { exportLinks, layout } from '../pages/layout.ts';
import { table } from '../pages/table.ts';

const CIRCUIT = ['closed', 'open', 'half-open', 'isolated'];

/**
 * Queues and workers, from the processes' Prometheus endpoints: cluster-wide figures (queue
 * depth, tasks by status, tools no worker serves) and per process (runs, circuit breakers).
 * They name no tenant, so the page is for operators, who run the deployment.
 */
export function queueRoutes(deps: {
  logger: Logger;
  endpoints: readonly Endpoint[];
  token?: string;
  fetch?: typeof fetch;
}): Router {
  const router = Router();
  router.get(
    '/queues',
    requireRole(deps.logger, ['operator']),
    async (req: Request, res: Response) => {
      const format = exportFormatOf(req.query.format);
      if (format === 'invalid') {
        return refuse(res, deps.logger, 400, 'invalid_request', 'format must be csv or json');
      }
      const readings = await readMetrics(deps.endpoints, {
        ...(deps.token ? { token: deps.token } : {}),
        ...(deps.fetch ? { fetch: deps.fetch } : {}),
      });
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
        circuits: r.ok
          ? r.samples
              .filter((s) => s.name === 'mtg_downstream_circuit_state')
              .map((s) => `${s.labels.downstream}: ${CIRCUIT[s.value] ?? s.value}`)
              .join(', ') || '—'
          : '',
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
      const body = html`<p>
          Cluster-wide figures (every tenant), as the processes' metrics report them.
        </p>
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

/** A worker's mtg_worker_slots{state="busy"|"total"} as `busy/total` ('—' for others). */
function slotsOf(samples: Sample[]): string {
  const of = (state: string) =>
    samples.find((s) => s.name === 'mtg_worker_slots' && s.labels.state === state)?.value;
  const busy = of('busy');
  const total = of('total');
  return total === undefined ? '—' : `${busy ?? 0}/${total}`;
}
