import { Counter, Gauge, type Registry } from 'prom-client';
import { createTaskEndMetrics } from './task-end-metrics.ts';

/** Circuit states as gauge values (cockatiel's numbering). */
export const CIRCUIT_STATE_VALUE = { closed: 0, open: 1, half_open: 2, isolated: 3 } as const;

/** What a worker reports about the tasks it runs and the downstreams it calls. */
export function createWorkerMetrics(registry: Registry) {
  return {
    ...createTaskEndMetrics(registry),
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
