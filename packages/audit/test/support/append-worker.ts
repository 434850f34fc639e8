// A separate writer process for the concurrency test:
//   node append-worker.ts <database url> <connections> <events per connection> <start at (epoch ms)> <tx|auto|pool> [tenants]
// Opens its connections as mtg_gateway, waits for the common start time, then each connection
// appends its events: `tx` in a transaction each (BEGIN, audit.append, COMMIT: the services'
// withTransaction), `auto` as single statements on its own connection, `pool` as that many
// concurrent writers appending on one pool (the services' pool appends: group commit).
// With `tenants`, connection k of every process writes tenant `shared-<k mod tenants>` (so
// several processes append to each tenant's chain at once), and every 7th event is a system
// event (no tenant: chain 0). Without it, each process writes a tenant of its own.
// Prints {"events": n, "ms": elapsed} on stdout.
import pg from 'pg';
import { createPool } from '@mtg/db';
import { appendAuditGrouped, appendAuditInTransaction } from '../../src/index.ts';
import { sampleEvent } from './events.ts';

const [url, connections, perConnection, startAt, mode, tenants] = process.argv.slice(2);
const clients = await Promise.all(
  Array.from({ length: Number(connections) }, async () => {
    const c = new pg.Client({ connectionString: url, options: '-c role=mtg_gateway' });
    await c.connect();
    return c;
  }),
);
const pool =
  mode === 'pool'
    ? createPool({ connectionString: url!, role: 'mtg_gateway', max: Number(connections) })
    : undefined;
await new Promise((r) => setTimeout(r, Math.max(0, Number(startAt) - Date.now())));
const started = performance.now();
await Promise.all(
  clients.map(async (c, k) => {
    for (let i = 0; i < Number(perConnection); i++) {
      if (mode === 'tx') await c.query('BEGIN');
      const shared = tenants ? `shared-${k % Number(tenants)}` : undefined;
      const event = sampleEvent(k * 1000 + i, shared ?? `tenant-${process.pid}`);
      if (shared && i % 7 === 3) {
        delete event.tenant;
        event.type = 'auth.denied';
      }
      await (pool ? appendAuditGrouped(pool, event) : appendAuditInTransaction(c, event));
      if (mode === 'tx') await c.query('COMMIT');
    }
  }),
);
const ms = performance.now() - started;
await Promise.all(clients.map((c) => c.end()));
await pool?.end();
process.stdout.write(JSON.stringify({ events: clients.length * Number(perConnection), ms }) + '\n');
