// The start baseline: raw pg-boss send() with `concurrency` concurrent senders for
// `durationS`, in a process of its own. argv: url queue concurrency durationS. Prints JSON
// (with its own CPU time and that of its PostgreSQL backends).
import { PgBoss } from 'pg-boss';
import { cpuMeter, postgresBackends } from './lib/cpu.ts';

const [url, queue, concurrencyArg, durationArg] = process.argv.slice(2);
const concurrency = Number(concurrencyArg);
const durationMs = Number(durationArg) * 1000;

const boss = new PgBoss({ connectionString: url!, schedule: false, supervise: false, max: 20 });
boss.on('error', () => {});
await boss.start();
if (!(await boss.getQueue(queue!))) await boss.createQueue(queue!);
// PostgreSQL's side, measured here while this process's connections are still open.
const database = new URL(url!).pathname.slice(1);
const meter = cpuMeter({ postgres: () => postgresBackends(database) });
const latencies: number[] = [];
let sent = 0;
let errors = 0;
const started = performance.now();
const until = started + durationMs;
await Promise.all(
  Array.from({ length: concurrency }, async (_, c) => {
    let i = 0;
    while (performance.now() < until) {
      const t = performance.now();
      try {
        await boss.send(queue!, { sender: c, n: i++, payload: 'x'.repeat(64) });
        sent++;
        latencies.push(performance.now() - t);
      } catch {
        errors++;
      }
    }
  }),
);
const elapsedS = (performance.now() - started) / 1000;
const postgresMs = meter.stop().ms.postgres ?? NaN;
await boss.stop({ graceful: false, close: true });
latencies.sort((a, b) => a - b);
const pct = (p: number) =>
  latencies[Math.max(0, Math.ceil((p / 100) * latencies.length) - 1)] ?? NaN;
const cpu = process.cpuUsage();
process.stdout.write(
  JSON.stringify({
    sent,
    errors,
    durationS: elapsedS,
    perSecond: sent / elapsedS,
    p50: pct(50),
    p99: pct(99),
    cpuMs: (cpu.user + cpu.system) / 1000,
    postgresMs,
  }) + '\n',
);
