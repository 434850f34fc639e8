import type { Pool } from '@mtg/db';
import type { EndpointReading, Sample } from './read-metrics.ts';

/**
 * A worker is live while it announced itself this recently (the gateway's rule, packages/tasks
 * live-workers.ts: workers refresh app.workers every few seconds, a killed one ages out).
 */
const WORKER_SEEN_WITHIN_S = 15;

const CIRCUIT = ['closed', 'open', 'half-open', 'isolated'];

export interface QueueDepth {
  queue: string;
  tool: string;
  queued: number;
  running: number;
  retry: number;
  paused: number;
}

export interface PoolWorker {
  id: string;
  /** host:port of its metrics endpoint, when one of CONSOLE_METRICS_URLS is this worker's. */
  address: string;
  startedAt: Date;
  seenAt: Date;
  /** Seconds since its last heartbeat (app.workers.seen_at). */
  seenAgoS: number;
  /** Tasks whose lease it holds. */
  running: number;
  /** `busy/total` from its metrics, or '' without them. */
  slots: string;
  /** Its circuit breakers (targets and upstreams its tools call), from its metrics. */
  circuits: string;
}

export interface WorkerPool {
  /** What the pool serves, by tool: `generate_report`, `bulk_update_records + upstream:demo`. */
  name: string;
  queues: QueueDepth[];
  workers: PoolWorker[];
}

export interface PoolsView {
  pools: WorkerPool[];
  /** Queues with open tasks (or that the gateway serves) which no live worker fetches from. */
  unserved: QueueDepth[];
}

/** The tool of a queue name (`tool.<name>.<fingerprint>`, `upstream.<name>`). */
export function toolOfQueue(queue: string): string {
  const tool = /^tool\.(.+)\.[0-9a-f]+$/.exec(queue);
  if (tool) return tool[1]!;
  const upstream = /^upstream\.(.+)$/.exec(queue);
  return upstream ? `upstream:${upstream[1]}` : queue;
}

/**
 * Workers grouped into pools (the workers serving the same set of queues, i.e. the same
 * WORKER_TOOLS), each with its queues' depth, its live workers and their circuits; and the
 * queues no live worker serves. Depth and workers come from the database (the console's
 * summary views); slots and circuits from the workers' own metrics endpoints, matched by
 * the `worker` label every worker series carries.
 */
export async function readWorkerPools(
  pool: Pool,
  readings: readonly EndpointReading[],
): Promise<PoolsView> {
  const [workers, depths] = await Promise.all([
    pool.query<{
      id: string;
      queues: string[];
      started_at: Date;
      seen_at: Date;
      seen_ago_s: number;
      running: number;
    }>(
      `SELECT id, queues, started_at, seen_at,
              floor(extract(epoch FROM now() - seen_at))::int AS seen_ago_s, running
         FROM app.console_workers
        WHERE seen_at > now() - $1 * interval '1 second'
        ORDER BY id`,
      [WORKER_SEEN_WITHIN_S],
    ),
    pool.query<QueueDepth>(
      `SELECT queue, tool, queued, running, retry, paused FROM app.console_queue_depth
        ORDER BY queue`,
    ),
  ]);
  const depthOf = new Map(depths.rows.map((d) => [d.queue, d]));
  // Queues the gateway places tasks in, even those with none open right now.
  for (const r of readings) {
    if (!r.ok) continue;
    for (const s of r.samples) {
      if (s.name !== 'mtg_queue_depth' || !s.labels.queue || depthOf.has(s.labels.queue)) continue;
      const queue = s.labels.queue;
      depthOf.set(queue, { queue, tool: s.labels.tool ?? toolOfQueue(queue), ...ZERO });
    }
  }
  const emptyOf = (queue: string): QueueDepth => ({ queue, tool: toolOfQueue(queue), ...ZERO });

  const byWorker = new Map<string, { address: string; samples: Sample[] }>();
  for (const r of readings) {
    if (!r.ok) continue;
    const id = r.samples.find((s) => s.labels.service === 'worker' && s.labels.worker)?.labels
      .worker;
    if (id) byWorker.set(id, { address: new URL(r.endpoint.url).host, samples: r.samples });
  }

  const pools = new Map<string, WorkerPool>();
  for (const w of workers.rows) {
    const queues = [...new Set(w.queues)].sort();
    const key = queues.join('\n');
    let p = pools.get(key);
    if (!p) {
      const tools = queues.map((q) => depthOf.get(q)?.tool ?? toolOfQueue(q));
      p = {
        name: [...new Set(tools)].sort().join(' + '),
        queues: queues.map((q) => depthOf.get(q) ?? emptyOf(q)),
        workers: [],
      };
      pools.set(key, p);
    }
    const metrics = byWorker.get(w.id);
    p.workers.push({
      id: w.id,
      address: metrics?.address ?? '',
      startedAt: w.started_at,
      seenAt: w.seen_at,
      seenAgoS: w.seen_ago_s,
      running: w.running,
      slots: metrics ? slotsOf(metrics.samples) : '',
      circuits: metrics ? circuitsOf(metrics.samples) : '',
    });
  }
  const served = new Set(workers.rows.flatMap((w) => w.queues));
  return {
    pools: [...pools.values()].sort((a, b) => a.name.localeCompare(b.name)),
    unserved: [...depthOf.values()].filter((d) => !served.has(d.queue)),
  };
}

const ZERO = { queued: 0, running: 0, retry: 0, paused: 0 };

/** A worker's mtg_worker_slots{state="busy"|"total"} as `busy/total`. */
export function slotsOf(samples: readonly Sample[]): string {
  const of = (state: string) =>
    samples.find((s) => s.name === 'mtg_worker_slots' && s.labels.state === state)?.value;
  const busy = of('busy');
  const total = of('total');
  return total === undefined ? '—' : `${busy ?? 0}/${total}`;
}

/**
 * A process's circuit breakers: `target: state` for each downstream target and upstream it
 * reported. A breaker is reported from its first change on, so none listed means all closed.
 */
export function circuitsOf(samples: readonly Sample[]): string {
  const circuits = samples.flatMap((s) =>
    s.name === 'mtg_downstream_circuit_state'
      ? [`${s.labels.downstream}: ${CIRCUIT[s.value] ?? s.value}`]
      : s.name === 'mtg_upstream_circuit_state'
        ? [`upstream ${s.labels.upstream}: ${CIRCUIT[s.value] ?? s.value}`]
        : [],
  );
  return circuits.join(', ') || 'all closed';
}
