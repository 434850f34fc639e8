import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** Circuit states as gauge values (cockatiel's numbering). */
export const CIRCUIT_STATE_VALUE = { closed: 0, open: 1, half_open: 2, isolated: 3 } as const;

const DURATION_BUCKETS = [0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200];
const PICKUP_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

/** What a worker reports about the tasks it runs and the downstreams it calls. */
export function createWorkerMetrics(registry: Registry) {
  return {
    taskDuration: new Histogram({
      name: 'mtg_task_duration_seconds',
      help: 'From creation to the end of a task this worker settled, by tool and outcome',
      labelNames: ['tool', 'status', 'outcome'],
      buckets: DURATION_BUCKETS,
      registers: [registry],
    }),
    pickupLatency: new Histogram({
      name: 'mtg_task_pickup_seconds',
      help: 'From creation to the first start of a task this worker settled (created_at → started_at)',
      labelNames: ['tool'],
      buckets: PICKUP_BUCKETS,
      registers: [registry],
    }),
    runs: new Counter({
      name: 'mtg_task_runs_total',
      help: 'Task runs ended on this worker, by how they ended (settled, retry, released, lost…)',
      labelNames: ['result'],
      registers: [registry],
    }),
    circuitState: new Gauge({
      name: 'mtg_downstream_circuit_state',
      help: 'Circuit breaker per downstream: 0 closed, 1 open, 2 half-open, 3 isolated',
      labelNames: ['downstream'],
      registers: [registry],
    }),
    circuitTransitions: new Counter({
      name: 'mtg_downstream_circuit_transitions_total',
      help: 'Circuit breaker state changes per downstream, by the state entered',
      labelNames: ['downstream', 'state'],
      registers: [registry],
    }),
  };
}

export type WorkerMetrics = ReturnType<typeof createWorkerMetrics>;
