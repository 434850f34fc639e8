export { createRegistry } from './create-registry.ts';
export { registerClusterGauges } from './cluster-gauges.ts';
export { createWorkerMetrics, CIRCUIT_STATE_VALUE, type WorkerMetrics } from './worker-metrics.ts';
export { createGatewayMetrics, type GatewayMetrics } from './gateway-metrics.ts';
export { scrapeAllowed } from './scrape-access.ts';
export { serveMetrics, type MetricsServer } from './serve-metrics.ts';
export type { Registry } from 'prom-client';
export {
  registerPoolGauges,
  registerAuditGauges,
  registerQueueDepthGauges,
  registerSlotGauges,
  createAuditAppendMetrics,
  createExchangeMetrics,
  createTargetCallMetrics,
  registerUpstreamCallMetrics,
  registerUpstreamRefusalMetrics,
  type ExchangeMetrics,
  type TargetCallMetrics,
  type PoolCounts,
} from './operations-metrics.ts';
export { instrumentExchanger, instrumentFetch } from './instrument-calls.ts';
export { createReadRouteMetrics } from './read-route-metrics.ts';
