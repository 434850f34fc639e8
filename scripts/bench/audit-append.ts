// Audit appends under concurrent writers, in a process of its own: `writers` connections
// (as the worker role, as the product appends) each calling SELECT audit.append(...) in a
// loop for `durationS`. argv: url writers durationS [nosync]. Prints JSON.
import pg from 'pg';
import { canonicalJson } from '@mtg/audit';

// argv[5] "nosync": synchronous_commit=off for these sessions (a diagnostic: shows how much of
// the cost is waiting for the WAL flush of each commit).
const [url, writersArg, durationArg, mode] = process.argv.slice(2);
const writers = Number(writersArg);
const until = performance.now() + Number(durationArg) * 1000;
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
let appended = 0;
const latencies: number[] = [];
const started = performance.now();
await Promise.all(
  clients.map(async (c, w) => {
    let i = 0;
    while (performance.now() < until) {
      // A body the size of a real task.step_completed event.
      const body = canonicalJson({
        taskId: 'f'.repeat(32),
        tenant: `bench-${w}`,
        subject: 'bench',
        client: 'mcp-agent',
        tool: 'bulk_update_records',
        correlationId: `bench-${w}-${i}`,
        data: { step: `batch:${i++}`, durationMs: 200, worker: `bench-${w}` },
      });
      const t = performance.now();
      await c.query('SELECT audit.append($1, $2)', ['task.step_completed', body]);
      latencies.push(performance.now() - t);
      appended++;
    }
  }),
);
const elapsedS = (performance.now() - started) / 1000;
await Promise.all(clients.map((c) => c.end()));
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
