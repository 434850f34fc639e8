// Audit appends under concurrent writers, in a process of its own, as the worker role (as the
// product appends). argv: url writers durationS mode [tenants]. Prints JSON.
//   tenants: writer w appends for tenant `bench-<w mod tenants>`, so the writers share that
//            many tenants' chains (default: one tenant per writer). Each tenant has a chain
//            and a lock of its own (migration 080): fewer tenants, more waiting.
//   sql:    `writers` connections, each calling SELECT audit.append(...) in a loop (one event
//           per commit);
//   nosync: the same with synchronous_commit=off (a diagnostic: how much of the cost is
//           waiting for each commit's WAL flush; never a setting for the real trail);
//   pool:   `writers` concurrent writers calling appendAuditGrouped() on one pool, which is how the
//           gateway and workers append outside a transaction (group commit).
import pg from 'pg';
import { appendAuditGrouped, canonicalJson, type AuditEvent } from '@mtg/audit';
import { createPool } from '@mtg/db';

const [url, writersArg, durationArg, mode = 'sql', tenantsArg] = process.argv.slice(2);
const writers = Number(writersArg);
const tenants = tenantsArg ? Number(tenantsArg) : writers;

// A body the size of a real task.step_completed event.
function event(w: number, i: number): AuditEvent {
  return {
    type: 'task.step_completed',
    taskId: 'f'.repeat(32),
    tenant: `bench-${w % tenants}`,
    subject: 'bench',
    client: 'mcp-agent',
    tool: 'bulk_update_records',
    correlationId: `bench-${process.pid}-${w}-${i}`,
    data: { step: `batch:${i}`, durationMs: 200, worker: `bench-${w}` },
  };
}

type Append = (e: AuditEvent) => Promise<unknown>;
let appenders: Append[];
let close: () => Promise<void>;
if (mode === 'pool') {
  const pool = createPool({ connectionString: url!, role: 'mtg_worker', max: 4 });
  appenders = Array.from({ length: writers }, () => (e: AuditEvent) => appendAuditGrouped(pool, e));
  close = () => pool.end();
} else {
  const clients = await Promise.all(
    Array.from({ length: writers }, async () => {
      const c = new pg.Client({
        connectionString: url,
        options: `-c role=mtg_worker${mode === 'nosync' ? ' -c synchronous_commit=off' : ''}`,
        application_name: 'bench-audit',
      });
      await c.connect();
      return c;
    }),
  );
  appenders = clients.map(
    (c) =>
      ({ type, ...body }: AuditEvent) =>
        c.query('SELECT audit.append($1, $2)', [type, canonicalJson(body)]),
  );
  close = async () => void (await Promise.all(clients.map((c) => c.end())));
}

const until = performance.now() + Number(durationArg) * 1000;
let appended = 0;
const latencies: number[] = [];
const started = performance.now();
await Promise.all(
  appenders.map(async (append, w) => {
    let i = 0;
    while (performance.now() < until) {
      const t = performance.now();
      await append(event(w, i++));
      latencies.push(performance.now() - t);
      appended++;
    }
  }),
);
const elapsedS = (performance.now() - started) / 1000;
await close();
latencies.sort((a, b) => a - b);
const pct = (p: number) =>
  latencies[Math.max(0, Math.ceil((p / 100) * latencies.length) - 1)] ?? NaN;
process.stdout.write(
  JSON.stringify({
    appended,
    durationS: elapsedS,
    perSecond: appended / elapsedS,
    p50: pct(50),
    p99: pct(99),
  }) + '\n',
);
