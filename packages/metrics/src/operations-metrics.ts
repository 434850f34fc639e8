import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Queryable } from '@mtg/db';

/** What a pg Pool tells about itself (node-postgres' counters). */
export interface PoolCounts {
  totalCount: number;
  idleCount: number;
  waitingCount: number;
}

/**
 * The process's database pool, read when scraped: connections open and idle, and callers
 * waiting for one (a pool too small for the load shows here before it shows as latency).
 */
export function registerPoolGauges(registry: Registry, pool: PoolCounts): void {
  new Gauge({
    name: 'mtg_db_pool_connections',
    help: "This process's database pool: connections open (total), idle, and callers waiting for one",
    labelNames: ['state'],
    registers: [registry],
    collect() {
      this.set({ state: 'total' }, pool.totalCount);
      this.set({ state: 'idle' }, pool.idleCount);
      this.set({ state: 'waiting' }, pool.waitingCount);
    },
  });
}

/** Appends through this process's pool (group commit): queue wait plus commit, per event. */
export function createAuditAppendMetrics(registry: Registry) {
  return new Histogram({
    name: 'mtg_audit_append_seconds',
    help: 'Audit events appended through this process, from append to durable commit',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
}

// The partition maintenance lock (packages/db/migrations 003/080, audit.lock_chain):
// pg_advisory_xact_lock(7310042002). Each chain's own lock is its row of audit.chains
// (migration 080), taken by append_many() (its UPDATE of the head, migration 250; FOR UPDATE
// in the general path).
const CHAIN_LOCK = 7_310_042_002n;

/**
 * Cluster-wide audit gauges, read from PostgreSQL when scraped (cached like the others):
 * sessions waiting for a chain lock (any chain's row, or the partition maintenance lock) and
 * the longest wait, the signed checkpoint's age and
 * the last recorded verification (audit:verify, audit:archive).
 */
export function registerAuditGauges(
  registry: Registry,
  deps: { db: Queryable; cacheMs?: number },
): void {
  const cacheMs = deps.cacheMs ?? 5000;
  // Elapsed time (performance.now(), which starts near 0): never read is stale.
  let at = -Infinity;
  let state = {
    waiters: 0,
    longestWait: 0,
    checkpointAge: Number.NaN,
    verifyAge: Number.NaN,
    verifyOk: Number.NaN,
  };
  let pending: Promise<void> | undefined;
  // One read for all five gauges of a scrape: they share the promise while it runs.
  const refresh = () => {
    if (pending) return pending;
    if (performance.now() - at < cacheMs) return Promise.resolve();
    pending = read().finally(() => {
      at = performance.now();
      pending = undefined;
    });
    return pending;
  };
  const read = async () => {
    // A row lock waiter holds the row's tuple lock while it waits for the holder's
    // transaction (the next ones wait for that tuple lock): both count.
    const lock = await deps.db.query<{ waiters: number; longest: number }>(
      `WITH chains AS (SELECT pg_catalog.to_regclass('audit.chains') AS rel)
       SELECT count(DISTINCT l.pid)::int AS waiters,
              coalesce(max(extract(epoch FROM now() - l.waitstart)), 0)::float8 AS longest
         FROM pg_catalog.pg_locks l, chains
        WHERE NOT l.granted AND (
              (l.locktype = 'advisory' AND l.objsubid = 1
               AND l.classid = ($1::bigint >> 32)::oid AND l.objid = ($1::bigint & 4294967295)::oid)
           OR (l.locktype = 'tuple' AND l.relation = chains.rel)
           OR (l.locktype = 'transactionid' AND EXISTS (
                 SELECT 1 FROM pg_catalog.pg_locks t
                  WHERE t.pid = l.pid AND t.locktype = 'tuple' AND t.relation = chains.rel)))`,
      [CHAIN_LOCK.toString()],
    );
    const audit = await deps.db.query<{
      checkpoint_age: number | null;
      verify_age: number | null;
      verify_ok: boolean | null;
    }>(
      `SELECT extract(epoch FROM now() - audit.last_checkpoint_at())::float8 AS checkpoint_age,
              extract(epoch FROM now() - v.ran_at)::float8 AS verify_age, v.ok AS verify_ok
         FROM (SELECT 1) one LEFT JOIN audit.last_verification() v ON true`,
    );
    const row = audit.rows[0];
    state = {
      waiters: lock.rows[0]?.waiters ?? 0,
      longestWait: lock.rows[0]?.longest ?? 0,
      checkpointAge: row?.checkpoint_age ?? Number.NaN,
      verifyAge: row?.verify_age ?? Number.NaN,
      verifyOk: row?.verify_ok == null ? Number.NaN : row.verify_ok ? 1 : 0,
    };
  };
  const gauge = (name: string, help: string, value: () => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        await refresh();
        this.set(value());
      },
    });
  gauge(
    'mtg_audit_chain_lock_waiters',
    'Database sessions waiting for an audit chain lock (any chain, cluster-wide)',
    () => state.waiters,
  );
  gauge(
    'mtg_audit_chain_lock_wait_seconds',
    'Longest current wait for an audit chain lock, 0 when nobody waits (cluster-wide)',
    () => state.longestWait,
  );
  gauge(
    'mtg_audit_checkpoint_age_seconds',
    'Age of the newest signed audit checkpoint; NaN when none was ever signed (cluster-wide)',
    () => state.checkpointAge,
  );
  gauge(
    'mtg_audit_verification_age_seconds',
    'Age of the last recorded audit chain verification; NaN when none was recorded',
    () => state.verifyAge,
  );
  gauge(
    'mtg_audit_verification_ok',
    'Whether the last recorded audit chain verification passed (1) or failed (0)',
    () => state.verifyOk,
  );
}

/**
 * Per-queue depth, for scaling and watching each worker pool: jobs waiting (queued) and
 * running (active) in each pg-boss queue `tool.<name>.<fingerprint>`, labelled by tool.
 */
export function registerQueueDepthGauges(
  registry: Registry,
  deps: {
    queues: ReadonlyMap<string, string>; // tool → queue
    depth: (queue: string) => Promise<{ queued: number; active: number } | undefined>;
    cacheMs?: number;
  },
): void {
  const cacheMs = deps.cacheMs ?? 5000;
  let at = -Infinity;
  let depths: Array<{ tool: string; queue: string; queued: number; active: number }> = [];
  new Gauge({
    name: 'mtg_queue_depth',
    help: 'Jobs per pg-boss queue (one per long tool and schema): queued and active (cluster-wide)',
    labelNames: ['tool', 'queue', 'state'],
    registers: [registry],
    async collect() {
      if (performance.now() - at >= cacheMs) {
        at = performance.now();
        const next = [];
        for (const [tool, queue] of deps.queues) {
          const d = await deps.depth(queue);
          next.push({ tool, queue, queued: d?.queued ?? 0, active: d?.active ?? 0 });
        }
        depths = next;
      }
      for (const d of depths) {
        this.set({ tool: d.tool, queue: d.queue, state: 'queued' }, d.queued);
        this.set({ tool: d.tool, queue: d.queue, state: 'active' }, d.active);
      }
    },
  });
}

/** Token exchanges this process made (RFC 8693 / OBO), by outcome, and their latency. */
export function createExchangeMetrics(registry: Registry) {
  return {
    duration: new Histogram({
      name: 'mtg_token_exchange_duration_seconds',
      help: 'Token exchanges with the IdP, by outcome (ok, refused, error)',
      labelNames: ['outcome'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    failures: new Counter({
      name: 'mtg_token_exchange_failures_total',
      help: 'Token exchanges that did not yield a token: refused (with the OAuth error) or failed (error)',
      labelNames: ['error'],
      registers: [registry],
    }),
  };
}

export type ExchangeMetrics = ReturnType<typeof createExchangeMetrics>;

/** HTTP requests to each named target, by outcome (2xx, 4xx, 5xx, error, aborted). */
export function createTargetCallMetrics(registry: Registry) {
  return {
    requests: new Counter({
      name: 'mtg_target_requests_total',
      help: 'HTTP attempts to each target, by method and outcome (status class, error, aborted)',
      labelNames: ['target', 'method', 'outcome'],
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'mtg_target_request_duration_seconds',
      help: 'HTTP attempts to each target, by method',
      labelNames: ['target', 'method'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
  };
}

export type TargetCallMetrics = ReturnType<typeof createTargetCallMetrics>;

/** A worker's task slots (WORKER_CONCURRENCY): busy and total, read when scraped. */
export function registerSlotGauges(
  registry: Registry,
  slots: { busy: () => number; total: number },
): void {
  new Gauge({
    name: 'mtg_worker_slots',
    help: "This worker's task slots: busy (running a task) and total (WORKER_CONCURRENCY)",
    labelNames: ['state'],
    registers: [registry],
    collect() {
      this.set({ state: 'busy' }, slots.busy());
      this.set({ state: 'total' }, slots.total);
    },
  });
}

/**
 * Tools an upstream listed that the gateway refused to serve (`mtg_upstream_tools_refused_total`,
 * by upstream and reason: reserved_name, over_cap, invalid_name, duplicate_name, name_taken),
 * read when scraped from the counts the gateway's listings keep. Each listing that refuses a
 * tool counts it again, so a steady rate means the upstream still lists it.
 */
export function registerUpstreamRefusalMetrics(
  registry: Registry,
  refused: () => Iterable<{ upstream: string; reason: string; count: number }>,
): void {
  const seen = new Map<string, number>();
  new Counter({
    name: 'mtg_upstream_tools_refused_total',
    help: 'Tools an upstream listed that are not served, by upstream and reason (reserved_name, over_cap, invalid_name, duplicate_name, name_taken)',
    labelNames: ['upstream', 'reason'],
    registers: [registry],
    collect() {
      for (const { upstream, reason, count } of refused()) {
        const key = `${upstream}\n${reason}`;
        const delta = count - (seen.get(key) ?? 0);
        if (delta > 0) this.inc({ upstream, reason }, delta);
        seen.set(key, count);
      }
    },
  });
}

/**
 * Calls to each upstream MCP server by outcome (`mtg_upstream_calls_total`), read when
 * scraped from the counts its guard keeps, and each upstream's circuit state.
 */
export function registerUpstreamCallMetrics(
  registry: Registry,
  guards: () => Iterable<
    [string, { outcomes(): ReadonlyMap<string, number>; state(): string; inFlight(): number }]
  >,
): void {
  const seen = new Map<string, number>();
  new Counter({
    name: 'mtg_upstream_calls_total',
    help: 'Calls to each upstream MCP server, by outcome (ok, refused, failed, circuit_open, aborted)',
    labelNames: ['upstream', 'outcome'],
    registers: [registry],
    collect() {
      for (const [upstream, guard] of guards()) {
        for (const [outcome, n] of guard.outcomes()) {
          const key = `${upstream}\n${outcome}`;
          const delta = n - (seen.get(key) ?? 0);
          if (delta > 0) this.inc({ upstream, outcome }, delta);
          seen.set(key, n);
        }
      }
    },
  });
  new Gauge({
    name: 'mtg_upstream_circuit_state',
    help: 'Circuit of each upstream MCP server: 0 closed, 1 open, 2 half open, 3 isolated',
    labelNames: ['upstream'],
    registers: [registry],
    collect() {
      const value: Record<string, number> = { closed: 0, open: 1, half_open: 2, isolated: 3 };
      for (const [upstream, guard] of guards()) this.set({ upstream }, value[guard.state()] ?? 0);
    },
  });
  new Gauge({
    name: 'mtg_upstream_calls_in_flight',
    help: 'Calls in flight to each upstream MCP server (bounded by its concurrency cap)',
    labelNames: ['upstream'],
    registers: [registry],
    collect() {
      for (const [upstream, guard] of guards()) this.set({ upstream }, guard.inFlight());
    },
  });
}
