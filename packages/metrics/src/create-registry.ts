import { collectDefaultMetrics, Registry } from 'prom-client';

/**
 * How often the event-loop lag series sample the loop. prom-client's default, 10 ms, wakes
 * an idle process 100 times a second: about 50 ms of CPU every 10 s on this project's
 * reference machine (2 virtual cores), most of what an idle worker cost. At 100 ms a stall of
 * 100 ms or more still shows, and the series read the interval between samples, lag
 * included: a healthy loop reads about 0.1 s (docs/operations-resilience.md, "Metrics").
 */
export const EVENT_LOOP_SAMPLE_MS = 100;

/**
 * A registry for one process. Never prom-client's global one: tests run several gateways and
 * workers in one process, and each must report only its own numbers. `service` becomes a
 * label on every series (gateway, worker); the process's CPU, memory and event-loop metrics
 * are included.
 */
export function createRegistry(service: string, labels: Record<string, string> = {}): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service, ...labels });
  collectDefaultMetrics({
    register: registry,
    prefix: 'mtg_',
    eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS,
  });
  return registry;
}
