// Fills a migrated database with history, for measuring cost as the data grows: task rows
// (all ended, within retention unless --expired says otherwise), their step journal, and
// their audit events on per-tenant hash chains that `audit:verify` accepts. Bulk SQL, not
// the API: the task and journal rows come from generate_series, the events from multi-row
// INSERTs of rows hashed here (each chain's hash links are sequential, so they cannot be
// computed set-wise in SQL).
//
//   DATABASE_URL=<superuser URL of a migrated database> node scripts/bench/seed-volume.ts \
//     [--tasks 1000000] [--events-per-task 10] [--tenants 20] [--days 30] [--expired 0]
//
// The seeded tenants are vol-000, vol-001, …; it refuses to run twice on one database.
import { parseArgs } from 'node:util';
import pg from 'pg';
import { canonicalJson, eventHash, GENESIS_HASH } from '@mtg/audit';
import { volumeEvents, volumeTask, type VolumePlan } from './lib/volume-plan.ts';

const { values } = parseArgs({
  options: {
    tasks: { type: 'string', default: '1000000' },
    'events-per-task': { type: 'string', default: '10' },
    tenants: { type: 'string', default: '20' },
    days: { type: 'string', default: '30' },
    expired: { type: 'string', default: '0' },
    batch: { type: 'string', default: '5000' },
  },
});

function count(name: keyof typeof values, min: number): number {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer ≥ ${min}`);
  return n;
}

const url = process.env.DATABASE_URL;
if (!url) throw new Error('DATABASE_URL (a superuser URL of a migrated database) is required');

const plan: VolumePlan = {
  tasks: count('tasks', 1),
  eventsPerTask: count('events-per-task', 3),
  tenants: count('tenants', 1),
  // The history ends a minute ago, so live appends (stamped now) follow it in every chain.
  endMs: Date.now() - 60_000,
  spanMs: count('days', 1) * 86_400_000,
  expired: count('expired', 0),
};
const batch = count('batch', 100);

// Task rows and their journal, one generate_series range at a time. Times and ids follow
// the same formulas as volume-plan.ts, which the events are written from.
const TASKS = `
INSERT INTO app.tasks (id, issuer, tenant, subject, client, scopes, tool, arguments,
  argument_summary, argument_hash, idempotency_key, idempotency_kind, correlation_id, status,
  status_message, progress, created_at, updated_at, started_at, ended_at, deadline, ttl_ms,
  outcome, ended_by, lease_epoch, attempts, job_queue)
SELECT md5('vol-task-' || i), 'http://127.0.0.1/volume', 'vol-' || lpad((i % $3)::text, 3, '0'),
  'vol-user-' || (i % ($3 * 50)), 'vol-client-' || (i % 3), ARRAY['records:write'],
  'bulk_update_records', jsonb_build_object('records', 1000, 'batch', i),
  jsonb_build_object('records', 1000), md5('arg-' || i) || md5('hash-' || i), 'vol-' || i,
  'derived', 'vol-corr-' || i,
  CASE WHEN i % 50 = 0 THEN 'failed' WHEN i % 50 = 1 THEN 'cancelled' ELSE 'completed' END,
  'done', '{"current": 2, "total": 2}', c, e, c + interval '2 ms', e, c + interval '1 hour',
  CASE WHEN i < $5 THEN 1000 ELSE $4::bigint END,
  CASE WHEN i % 50 = 0 THEN 'failed' WHEN i % 50 = 1 THEN 'cancelled' ELSE 'completed' END,
  '{"path": "worker"}', 1, 1, 'task-run'
FROM generate_series($1::bigint, $2::bigint - 1) i,
  LATERAL (SELECT to_timestamp(($6::double precision - $7 + i * ($7 / $8::double precision)) / 1000) c) t,
  LATERAL (SELECT c + interval '300 ms' e) u`;

const STEPS = `
INSERT INTO app.task_steps (task_id, step, seq, output, lease_epoch, worker, started_at, completed_at)
SELECT md5('vol-task-' || i), 'batch-' || s, s, jsonb_build_object('updated', 500), 1, 'vol-worker',
  c + (s * 105) * interval '1 ms', c + (s * 105 + 100) * interval '1 ms'
FROM generate_series($1::bigint, $2::bigint - 1) i,
  LATERAL (SELECT to_timestamp(($3::double precision - $4 + i * ($4 / $5::double precision)) / 1000) c) t,
  generate_series(1, 2) s
WHERE i % 50 > 1`;

const EVENTS = `
INSERT INTO audit.events (chain_id, seq, occurred_at, type, body, prev_hash, hash, task_id,
  tenant, subject, client, tool, reason, correlation_id, actor_subject, actor_kind)
SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::timestamptz[], $4::text[], $5::text[],
  $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[],
  $13::text[], $14::text[], $15::text[], $16::text[])`;

interface Head {
  chainId: number;
  seq: number;
  hash: string;
  at: string;
}

async function main(): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`SET TIME ZONE 'UTC'`);
  const started = Date.now();
  try {
    const taken = await client.query(
      `SELECT 1 FROM audit.chains WHERE tenant LIKE 'vol-%' LIMIT 1`,
    );
    if (taken.rowCount)
      throw new Error('this database already holds a seeded volume (vol-* tenants)');
    // One chain per tenant, and every month's partition the history falls in.
    const heads: Head[] = [];
    for (let t = 0; t < plan.tenants; t++) {
      const r = await client.query<{ chain_id: string }>(
        `INSERT INTO audit.chains (chain_id, tenant) VALUES (nextval('audit.chain_ids'), $1) RETURNING chain_id`,
        [`vol-${String(t).padStart(3, '0')}`],
      );
      heads.push({ chainId: Number(r.rows[0]!.chain_id), seq: 0, hash: GENESIS_HASH, at: '' });
    }
    for (let m = plan.endMs - plan.spanMs; ;) {
      await client.query('SELECT audit.ensure_partition($1)', [new Date(m)]);
      const d = new Date(m);
      const next = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
      if (next > plan.endMs) break;
      m = next;
    }
    const ttlMs = plan.spanMs + 7 * 86_400_000;
    let events = 0;
    for (let lo = 0; lo < plan.tasks; lo += batch) {
      const hi = Math.min(plan.tasks, lo + batch);
      await client.query('BEGIN');
      await client.query(TASKS, [
        lo,
        hi,
        plan.tenants,
        ttlMs,
        plan.expired,
        plan.endMs,
        plan.spanMs,
        plan.tasks,
      ]);
      await client.query(STEPS, [lo, hi, plan.endMs, plan.spanMs, plan.tasks]);
      const cols: unknown[][] = Array.from({ length: 16 }, () => []);
      for (let i = lo; i < hi; i++) {
        const task = volumeTask(plan, i);
        const head = heads[task.tenantIndex]!;
        for (const e of volumeEvents(plan, task)) {
          const body = canonicalJson(e.body);
          head.seq += 1;
          const hash = eventHash({
            chain: head.chainId,
            seq: head.seq,
            occurredAt: e.occurredAt,
            type: e.type,
            prevHash: head.hash,
            body,
          });
          const row = [
            head.chainId,
            head.seq,
            e.occurredAt,
            e.type,
            body,
            head.hash,
            hash,
            e.body.taskId,
            e.body.tenant,
            e.body.subject,
            e.body.client,
            e.body.tool,
            e.body.reason ?? null,
            e.body.correlationId,
            e.body.actor?.subject ?? null,
            e.body.actor?.kind ?? null,
          ];
          row.forEach((v, k) => cols[k]!.push(v));
          head.hash = hash;
          head.at = e.occurredAt;
          events += 1;
        }
      }
      await client.query(EVENTS, cols);
      await client.query('COMMIT');
      if ((lo / batch) % 20 === 0) {
        process.stderr.write(
          `seed-volume: ${hi.toLocaleString('en')} tasks, ${events.toLocaleString('en')} events, ${((Date.now() - started) / 1000).toFixed(0)} s\n`,
        );
      }
    }
    // The heads last: until they move, an append to a seeded tenant would start a fork.
    for (const h of heads) {
      await client.query(
        'UPDATE audit.chains SET head_seq = $2, head_hash = $3, head_at = $4 WHERE chain_id = $1',
        [h.chainId, h.seq, h.hash, h.at],
      );
    }
    const analysed = Date.now();
    await client.query('ANALYZE app.tasks, app.task_steps, audit.events');
    const size = await client.query<{ tasks: string; events: string }>(
      `SELECT pg_size_pretty(pg_total_relation_size('app.tasks') + pg_total_relation_size('app.task_steps')) tasks,
              pg_size_pretty((SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits
                              WHERE inhparent = 'audit.events'::regclass)::bigint) events`,
    );
    process.stdout.write(
      `${JSON.stringify({
        tasks: plan.tasks,
        events,
        tenants: plan.tenants,
        days: plan.spanMs / 86_400_000,
        expired: plan.expired,
        seconds: Math.round((analysed - started) / 100) / 10,
        analyseSeconds: Math.round((Date.now() - analysed) / 100) / 10,
        taskBytes: size.rows[0]!.tasks,
        eventBytes: size.rows[0]!.events,
      })}\n`,
    );
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    await client.end();
  }
}

await main();
