import { Counter, Histogram, type Registry } from 'prom-client';
import { createTaskEndMetrics } from './task-end-metrics.ts';

/**
 * What a gateway replica reports: its HTTP traffic, the requests it denied, and the tasks it
 * ended itself (cancelled or revoked while no live worker held them).
 */
export function createGatewayMetrics(registry: Registry) {
  return {
    ...createTaskEndMetrics(registry),
    httpDuration: new Histogram({
      name: 'mtg_http_request_duration_seconds',
      help: 'Gateway HTTP requests by route, JSON-RPC method (on /mcp) and status',
      labelNames: ['route', 'rpc', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers: [registry],
    }),
    denials: new Counter({
      name: 'mtg_denials_total',
      help: 'Requests denied, by where (auth, task) and reason code (the audited reason)',
      labelNames: ['layer', 'reason'],
      registers: [registry],
    }),
  };
}

export type GatewayMetrics = ReturnType<typeof createGatewayMetrics>;
