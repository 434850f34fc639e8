import { Counter, Gauge, type Registry } from 'prom-client';

/**
 * Where this process's routed reads ran (DATABASE_READ_URL, docs/scaling.md): `target` is
 * `replica` or `primary`, `reason` why (`replica`, `no_replica`, `replica_down`,
 * `replica_lagging`, `own_write`, `replica_failed`, `not_found`); and the replica's measured
 * staleness, read when scraped.
 */
export function createReadRouteMetrics(
  registry: Registry,
  replica?: () => { up: boolean; lagMs: number | undefined },
) {
  if (replica) {
    new Gauge({
      name: 'mtg_db_replica_lag_seconds',
      help: 'How stale the read replica was at its last check (-1: down or not measured)',
      registers: [registry],
      collect() {
        const s = replica();
        this.set(s.up && s.lagMs !== undefined ? s.lagMs / 1000 : -1);
      },
    });
  }
  return new Counter({
    name: 'mtg_db_reads_total',
    help: 'Routed reads (task status, results, lists) by where they ran and why',
    labelNames: ['target', 'reason'],
    registers: [registry],
  });
}
