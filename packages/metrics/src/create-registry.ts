import { collectDefaultMetrics, Registry } from 'prom-client';

/**
 * A registry for one process. Never prom-client's global one: tests run several gateways and
 * workers in one process, and each must report only its own numbers. `service` becomes a
 * label on every series (gateway, worker); the process's CPU, memory and event-loop metrics
 * are included.
 */
export function createRegistry(service: string, labels: Record<string, string> = {}): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service, ...labels });
  collectDefaultMetrics({ register: registry, prefix: 'mtg_' });
  return registry;
}
